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
from typing import TypeVar

import psycopg

T = TypeVar("T")


def wait_until(predicate: Callable[[], T], timeout: float, what: str, every: float = 0.02) -> T:
    """Poll ``predicate`` until it returns something true, and return that; after ``timeout``
    seconds raise AssertionError saying ``what`` did not happen."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"waited {timeout:g} s for {what}, in vain")
        time.sleep(every)


def blocked_by(url: str, pid: int) -> int:
    """How many backends wait for a lock that backend ``pid`` holds, asked on a connection of its own
    (pg_stat_activity keeps one snapshot per transaction, so the holder cannot poll it itself)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                           "AND %s = ANY(pg_blocking_pids(pid))", (pid,)).fetchone()
    return int(row[0]) if row else 0
