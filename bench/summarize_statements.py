"""Statements and round trips per summarised episode (claim -> prepare -> model call -> finish).

    python bench/summarize_statements.py [--transcripts 40] [--backend single|citus|both]

Summarises ``--transcripts`` generated sessions at C=1 against the fake Anthropic server, once as
they come (first summaries) and once more after a prompt-version change (re-runs: each supersedes
an episode), on the embedded PostgreSQL and/or a scratch database on the Citus cluster. Every pooled
connection is traced by libpq (``PQtrace``), and each statement sent through psycopg is named by the
``-- name:`` block it came from. Printed per episode: statements by name, statements in all, and
client round trips (a burst of messages sent, then answers read: a wait for the server). On a Citus
cluster each statement that touches a distributed table also pays the coordinator's hop to a worker;
BEGIN, SET LOCAL, COMMIT and NOTIFY stay on the coordinator.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import psycopg
from _common import bench_database, scratch_home
from ingest_rate import generate
from psycopg import pq
from summarize_throughput import fake_server, timed_extractor
from support.citus_cluster import create_database, drop_database, unreachable

from jobs import config, migrate
from jobs.db import Database
from jobs.embeddings import get_embedder
from jobs.ingest import ingest
from jobs.sql import all_queries
from jobs.summarize import run_summarize


def _flat(text: str) -> str:
    """A query's text with comment lines dropped and whitespace collapsed."""
    return " ".join(" ".join(line for line in text.splitlines() if not line.lstrip().startswith("--")).split())


class Tally:
    """Statements by name (from psycopg's cursors) and the libpq trace files of every connection."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.by_name: Counter[str] = Counter()
        self.traces: list[Path] = []
        self.handles: list[IO[str]] = []  # open as long as their connections may live
        self.lock = threading.Lock()
        self.names = {_flat(text): name for name, text in all_queries().items()}

    def name(self, statement: object) -> str:
        text = statement.as_string() if isinstance(statement, psycopg.sql.Composable) else str(statement)
        flat = _flat(text)
        if flat.upper().startswith("SET LOCAL"):
            return "SET LOCAL " + flat.split()[2]
        return self.names.get(flat, flat[:40])

    def count(self, statement: object, n: int = 1) -> None:
        with self.lock:
            self.by_name[self.name(statement)] += n

    def round_trips(self) -> tuple[int, int]:
        """(client round trips, BEGIN + COMMIT) over every trace: a round trip is a run of frontend
        messages followed by the backend's answers (PQtrace lines start with F or B and a tab)."""
        trips = transactions = 0
        for path in self.traces:
            last = ""
            for line in path.read_text(errors="replace").splitlines():
                side = line[:2]
                if side == "B\t" and last == "F\t":
                    trips += 1
                if side == "F\t" and ('"BEGIN"' in line or '"COMMIT"' in line):
                    transactions += 1
                if side in ("F\t", "B\t"):
                    last = side
        return trips, transactions


@contextmanager
def traced(tally: Tally) -> Iterator[None]:
    """Count every cursor statement and trace every new connection while inside (psycopg's own
    ``Connection.connect``, which the pools call too, wrapped)."""
    execute, executemany = psycopg.Cursor.execute, psycopg.Cursor.executemany
    connect = psycopg.Connection.__dict__["connect"]  # the classmethod itself, put back as it was

    def counted_execute(self: psycopg.Cursor[Any], statement: Any, *args: Any, **kwargs: Any) -> Any:
        tally.count(statement)
        return execute(self, statement, *args, **kwargs)

    def counted_executemany(self: psycopg.Cursor[Any], statement: Any, params: Any, *args: Any, **kw: Any) -> Any:
        params = list(params)
        tally.count(statement, len(params))
        return executemany(self, statement, params, *args, **kw)

    def tracing_connect(cls: type[psycopg.Connection[Any]], *args: Any, **kwargs: Any) -> psycopg.Connection[Any]:
        conn = connect.__func__(cls, *args, **kwargs)
        with tally.lock:
            path = tally.home / f"trace-{len(tally.traces)}.txt"
            handle = path.open("w")
            tally.traces.append(path)
            tally.handles.append(handle)
        conn.pgconn.trace(handle.fileno())
        conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS)
        return conn

    psycopg.Cursor.execute = counted_execute
    psycopg.Cursor.executemany = counted_executemany
    psycopg.Connection.connect = classmethod(tracing_connect)
    try:
        yield
    finally:
        psycopg.Cursor.execute = execute
        psycopg.Cursor.executemany = executemany
        psycopg.Connection.connect = connect


def measure(settings: config.Settings, data: Path, home: Path, prompt_version: str | None) -> tuple[Tally, int]:
    """Summarise every eligible transcript at C=1 with the trace on; (tally, episodes written)."""
    proc, url = fake_server(0.0)
    try:
        run_settings = settings.with_(anthropic_api_key="bench", anthropic_base_url=url, max_retries=0)
        tally = Tally(home)
        extractor, _ = timed_extractor(run_settings)
        if prompt_version is not None:  # as if the prompt templates had changed
            extractor.prompt_version = prompt_version
        with traced(tally), Database(run_settings) as db:
            report = run_summarize(db, extractor=extractor, concurrency=1)
        extractor.close()
        for handle in tally.handles:
            handle.close()
    finally:
        proc.terminate()
        proc.wait()
    return tally, report.counts["done"]


def requeue(url: str) -> None:
    with psycopg.connect(url) as conn:
        conn.execute("UPDATE transcripts SET status = 'pending', next_attempt_at = now() - interval '1 second'")


def report(name: str, label: str, tally: Tally, done: int) -> dict[str, float]:
    trips, transactions = tally.round_trips()
    statements = sum(tally.by_name.values())
    print(
        f"[{name}] {label}: {done} episodes; per episode: {statements / done:.1f} statements through psycopg "
        f"(+ {transactions / done:.1f} BEGIN/COMMIT), {trips / done:.1f} client round trips"
    )
    for stmt, n in tally.by_name.most_common():
        print(f"    {n / done:6.2f}  {stmt}")
    return {"statements": statements / done, "round_trips": trips / done}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--transcripts", type=int, default=40)
    parser.add_argument("--backend", choices=("single", "citus", "both"), default="both")
    parser.add_argument("--shards", type=int, default=32)
    args = parser.parse_args()
    backends = ["single", "citus"] if args.backend == "both" else [args.backend]
    if "citus" in backends and (reason := unreachable()) is not None:
        sys.exit(reason)
    get_embedder("minilm").embed(["warm up"])
    cluster_db = f"episodes_bench_statements_{os.getpid()}"
    with scratch_home() as home:
        data = home / "sessions.jsonl"
        generate(data, args.transcripts, 12)
        try:
            for name in backends:
                if name == "single":
                    url = bench_database(home / "pgdata")
                    with psycopg.connect(url) as conn:
                        migrate.migrate(conn, embedding_dim=384, embedder="all-MiniLM-L6-v2")
                else:
                    url = create_database(cluster_db, shards=args.shards)
                settings = config.Settings(database_url=url, home=home)
                with Database(settings) as db:
                    ingest(db, [data])
                report(name, "first summaries", *measure(settings, data, home, None))
                requeue(url)
                report(
                    name,
                    "re-runs (a new prompt version supersedes each)",
                    *measure(settings, data, home, "bench-rerun"),
                )
        finally:
            if "citus" in backends:
                drop_database(cluster_db)


if __name__ == "__main__":
    main()
