"""Turns: one thread at a time per key (a user's recall copy), with locks that live only while needed."""

from __future__ import annotations

import threading
from collections.abc import Hashable, Iterator
from contextlib import contextmanager


class _Turn:
    """A key's lock, with the number of threads holding or waiting for it."""

    __slots__ = ("lock", "waiting")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.waiting = 0


class Turns:
    """Per-key mutual exclusion (thread-safe).

    A key's lock lives as long as some thread holds or waits for it, and goes with the last of them,
    whatever happens meanwhile to what it guards. (The recall index used to drop a user's lock with the
    user's evicted copy, so a recall arriving then took a new lock while the holder of the old one was
    still at work: two threads changed one copy at once.)
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._turns: dict[Hashable, _Turn] = {}  # keys some thread holds or waits for

    @contextmanager
    def turn(self, key: Hashable) -> Iterator[None]:
        """Hold ``key``'s turn for the ``with`` block (waiting for the thread that has it)."""
        with self._lock:
            turn = self._turns.get(key)
            if turn is None:
                turn = self._turns[key] = _Turn()
            turn.waiting += 1
        try:
            with turn.lock:
                yield
        finally:
            with self._lock:
                turn.waiting -= 1
                if not turn.waiting:
                    del self._turns[key]
