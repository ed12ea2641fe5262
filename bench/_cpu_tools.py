"""Measuring CPU for bench/recall_cpu.py: PostgreSQL's processes, named parts of this thread, cProfile."""

from __future__ import annotations

import cProfile
import io
import pstats
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _common import cpu_seconds, process_tree

DUMP_TO: Path | None = None  # --profile-dir: where show() also writes each profile (recall_cpu.main sets it)


class Postgres:
    """CPU seconds of the embedded PostgreSQL's processes so far."""

    def __init__(self, pgdata: Path | None) -> None:
        self.pgdata = pgdata

    def cpu(self) -> float:
        if self.pgdata is None:
            return float("nan")
        return cpu_seconds(process_tree(int((self.pgdata / "postmaster.pid").read_text().split()[0])))


class Parts:
    """CPU seconds spent in named parts of this process's main thread (wrapped functions)."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}

    def wrap(self, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.thread_time()
            try:
                return function(*args, **kwargs)
            finally:
                self.spent[name] = self.spent.get(name, 0.0) + time.thread_time() - started

        return timed


@contextmanager
def patched(owner: Any, name: str, value: Any) -> Iterator[None]:
    old = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, old)


def ms(seconds: float, n: int) -> str:
    return f"{1000 * seconds / max(n, 1):6.2f} ms"


def show(profiler: cProfile.Profile, top: int, title: str) -> None:
    if DUMP_TO is not None:
        DUMP_TO.mkdir(parents=True, exist_ok=True)
        profiler.dump_stats(DUMP_TO / (title.split(" (")[0].replace(" ", "-") + ".prof"))
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    print(f"\n--- cProfile: {title} ---")
    print("\n".join(line for line in out.getvalue().splitlines() if line.strip()))


def profile(work: Callable[[], Any], top: int, title: str) -> None:
    profiler = cProfile.Profile(time.thread_time)  # CPU, not wall time: waits on PostgreSQL are free
    profiler.enable()
    work()
    profiler.disable()
    show(profiler, top, title)
