"""Waits on observable state, in place of sleeps.

A test that needs another thread or process to have reached a point (a listener subscribed, a
statement waiting for a lock, a lease past its end, a model call returned) polls for the sign of
it and fails, naming what it waited for, when the sign does not come. A fixed sleep instead either
wastes time or, on a loaded machine, lets the test check too early and pass without testing
anything.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
from psycopg.rows import tuple_row

T = TypeVar("T")


def wait_until(condition: Callable[[], T | None], timeout: float, what: str, every: float = 0.02) -> T:
    """Call ``condition`` until it returns something true, and return that; after ``timeout`` seconds raise
    AssertionError naming ``what`` it waited for and the last value ``condition`` returned."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"waited {timeout:g} s for {what}, in vain; the last value seen: {value!r}")
        time.sleep(every)


def on_citus(conn: psycopg.Connection[Any]) -> bool:
    return conn.cursor(row_factory=tuple_row).execute(
        "SELECT count(*) FROM pg_extension WHERE extname = 'citus'"
    ).fetchone() == (1,)


def backend(conn: psycopg.Connection[Any]) -> int:
    """The id by which other sessions see this connection's backend hold locks: its process id, or on
    a Citus cluster its global process id (the locks of a distributed table are taken on the workers)."""
    function = "citus_backend_gpid" if on_citus(conn) else "pg_backend_pid"
    row = conn.cursor(row_factory=tuple_row).execute(f"SELECT {function}()").fetchone()
    assert row is not None
    return int(row[0])


def blocked_by(url: str, holder: int) -> int:
    """How many sessions wait for a lock that ``holder`` (see :func:`backend`) holds, asked on a connection
    of its own (pg_stat_activity keeps one snapshot per transaction, so the holder cannot poll it itself).
    On Citus the waits are on the workers, and citus_lock_waits gathers them by global process id."""
    with psycopg.connect(url, autocommit=True) as conn:
        if on_citus(conn):
            row = conn.execute("SELECT count(*) FROM citus_lock_waits WHERE blocking_gpid = %s", (holder,)).fetchone()
        else:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND %s = ANY(pg_blocking_pids(pid))",
                (holder,),
            ).fetchone()
    return int(row[0]) if row else 0
