"""A heavy user's recall before and after the compress job made super-summaries of their old periods; prints
figures, asserts nothing.

    python bench/compressed_recall.py --home /tmp/rb47 --keep --episodes 50000 --users 2500 --heavy-users 2 \
        --heavy-size 10000 --lines 30 --periods year,quarter,month

Why: ``RecallConfig.line_episodes`` bounds how many episodes' lines ``recall_lines`` searches, which bounds a
heavy user's recall by episodes, not lines. A super-summary is one episode standing for a whole period: until
migration 0041 it carried a copy of every line of its period, and the line search read them all whenever it picked
it (10,000 sessions, two years compressed: recall 110 ms -> 1.12 s). Now the sessions it holds are searched, each
chosen by its own scores, and their lines are quoted under it; this bench says whether compressing still costs.

For each of ``--periods``: a copy of the bench database (``CREATE DATABASE ... TEMPLATE``), in which the compress
job (offline compressor, as of the bench's NOW) compresses the periods of heavy user u0 that ended more than
``--older-than`` ago; then ``--queries`` recalls of u0 in process (``Recaller.recall_vector``, a precomputed query
vector, as bench/recall.py) before and after, the same openings on both sides: median wall time, the process's CPU
and PostgreSQL's (its processes, /proc; the embedded server only) per recall, the supers made, the sessions and
lines the largest holds, and in how many blocks a super is shown (by its header and the quotes of its sessions).
The copy is dropped after each period.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

import _blas  # noqa: F401  numpy's BLAS threads as `episodes` sets them: before numpy loads
import numpy as np
import psycopg
from _data import NOW, BenchData, add_data_arguments, bench_data, sentence, unit_vector, with_dbname
from _load_service import cpu_seconds, process_tree
from psycopg import sql

from jobs.compress import OfflineCompressor, run_compress
from jobs.config import load
from jobs.db import Database
from jobs.recall import Recaller

COPY = "episodes_bench_compressed"
TENANT, USER = "t0", "u0"  # the first heavy user (bench/_data.py: users 0 .. heavy_users-1 hold heavy_size each)


def copy_of(data: BenchData) -> str:
    """A fresh copy of the bench database; its URL."""
    source = psycopg.conninfo.conninfo_to_dict(data.url)["dbname"]
    with psycopg.connect(data.admin_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(COPY)))
        conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(sql.Identifier(COPY), sql.Identifier(source)))
    return with_dbname(data.admin_url, COPY)


def drop_copy(data: BenchData) -> None:
    with psycopg.connect(data.admin_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(COPY)))


def postgres_clock(data: BenchData) -> Callable[[], float]:
    """CPU seconds of the embedded server's processes so far (NaN on a server given by DATABASE_URL)."""
    if data.server is None:
        return lambda: float("nan")
    postmaster = int((data.home / "pgdata" / "postmaster.pid").read_text().split()[0])
    return lambda: cpu_seconds(process_tree(postmaster))


def recalls(url: str, openings: list[tuple[str, np.ndarray]], pg_cpu: Callable[[], float]) -> dict[str, float]:
    """Median wall ms, mean process and PostgreSQL CPU ms per recall of u0, and blocks showing a super."""
    db = Database(load().with_(database_url=url))
    recaller = Recaller(db)
    try:
        recaller.recall_vector(TENANT, USER, *openings[0], now=NOW)  # warm the pool and the caches
        walls, supers = [], 0
        cpu0, pg0 = time.process_time(), pg_cpu()
        for message, vector in openings:
            started = time.perf_counter()
            result = recaller.recall_vector(TENANT, USER, message, vector, now=NOW)
            walls.append(time.perf_counter() - started)
            supers += any(ep.kind == "super" for ep in result.episodes)
        n = len(openings)
        return {
            "wall": 1000 * statistics.median(walls),
            "cpu": 1000 * (time.process_time() - cpu0) / n,
            "pg": 1000 * (pg_cpu() - pg0) / n,
            "supers shown": supers,
        }
    finally:
        db.close()


def largest_super(url: str) -> tuple[int, int, int]:
    """Supers of u0, the sessions of the largest, and their lines."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            """SELECT count(*) OVER (),
                      (SELECT count(*) FROM episodes s WHERE s.tenant_id = e.tenant_id AND s.compressed_into = e.id) AS n,
                      (SELECT count(*) FROM episodes s JOIN episode_lines l ON l.tenant_id = s.tenant_id
                                                      AND l.episode_id = s.id
                       WHERE s.tenant_id = e.tenant_id AND s.compressed_into = e.id)
               FROM episodes e WHERE e.tenant_id = %s AND e.user_id = %s AND e.kind = 'super' AND e.status = 'current'
               ORDER BY n DESC LIMIT 1""",
            (TENANT, USER),
        ).fetchone()
    return (0, 0, 0) if row is None else (int(row[0]), int(row[1]), int(row[2]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_data_arguments(parser)
    parser.add_argument("--periods", default="year,month", help="compress periods, comma-separated, one copy each")
    parser.add_argument("--older-than", default="12mo", help="as `episodes compress --older-than`")
    parser.add_argument("--queries", type=int, default=8, help="recalls of the heavy user on each side")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    openings = [(sentence(rng, 14), unit_vector(rng)) for _ in range(args.queries)]
    with bench_data(args) as data:
        pg_cpu = postgres_clock(data)
        print(f"heavy user {USER}: {args.heavy_size:,} episodes, ~{args.lines} lines each; as of {NOW:%Y-%m-%d}")
        for period in args.periods.split(","):
            url = copy_of(data)
            try:
                before = recalls(url, openings, pg_cpu)
                started = time.perf_counter()
                db = Database(load().with_(database_url=url))
                try:
                    report = run_compress(
                        db,
                        older_than=args.older_than,
                        period=period,
                        tenant=TENANT,
                        user=USER,
                        now=NOW,
                        compressor=OfflineCompressor(),
                        record_run=False,
                    )
                finally:
                    db.close()
                took = time.perf_counter() - started
                supers, sources, lines = largest_super(url)
                after = recalls(url, openings, pg_cpu)
            finally:
                drop_copy(data)
            print(
                f"--period {period}: {supers} supers in {took:.0f} s ({dict(report.counts)}); the largest holds "
                f"{sources:,} sessions of {lines:,} lines"
            )
            for name, got in (("before", before), ("after", after)):
                print(
                    f"  {name:6s} recall of {USER}: wall p50 {got['wall']:7.1f} ms, CPU a recall: process "
                    f"{got['cpu']:6.1f} ms + PostgreSQL {got['pg']:6.1f} ms; a super in {got['supers shown']:.0f} "
                    f"of {len(openings)} blocks"
                )
    print(f"cores: {os.cpu_count()}")


if __name__ == "__main__":
    main()
