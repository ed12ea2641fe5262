"""The service side of bench/api_load.py: what the service's processes hold and spend (memory, CPU, the
garbage collector's passes and the recall route's own seconds from /metrics) and the writer thread that
commits new episodes during the load."""

from __future__ import annotations

import datetime as dt
import resource
import threading
from pathlib import Path

import httpx
import numpy as np
import psycopg
from _common import cpu_seconds, process_tree
from _data import write_episode
from pgvector.psycopg import register_vector
from prometheus_client.parser import text_string_to_metric_families


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def worker_pids(pid: int) -> list[int]:
    """The uvicorn worker processes of the service (multiprocessing spawn children), or ``pid`` itself."""
    children = [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    workers = [c for c in children if b"spawn_main" in Path(f"/proc/{c}/cmdline").read_bytes()]
    return workers or [pid]


def gc_passes(base: str) -> dict[str, tuple[float, float]]:
    """Per generation, the garbage collector's passes so far and their seconds, from the service's /metrics."""
    found: dict[str, list[float]] = {}
    for family in text_string_to_metric_families(httpx.get(f"{base}/metrics", timeout=30).text):
        if family.name == "episodes_gc_pause_seconds":
            for sample in family.samples:
                kind = sample.name.rsplit("_", 1)[1]
                if kind in ("count", "sum"):
                    found.setdefault(sample.labels["generation"], [0.0, 0.0])[kind == "sum"] += sample.value
    return {g: (v[0], v[1]) for g, v in found.items()}


def recall_seconds(base: str) -> tuple[float, float]:
    """The service's own count and seconds of POST /v1/recall so far (its middleware's histogram, every
    worker): what it spent between reading a request and handing the answer to the transport."""
    count = total = 0.0
    for family in text_string_to_metric_families(httpx.get(f"{base}/metrics", timeout=30).text):
        if family.name == "episodes_http_request_seconds":
            for sample in family.samples:
                if sample.labels.get("route") == "/v1/recall" and sample.labels.get("method") == "POST":
                    if sample.name.endswith("_count"):
                        count += sample.value
                    elif sample.name.endswith("_sum"):
                        total += sample.value
    return count, total


class CpuClock:
    """CPU seconds used so far by the service's processes, the PostgreSQL server's and this process's
    (the load generator and the writer thread): where a recall's cost lands on the shared cores."""

    def __init__(self, service_pid: int, pgdata: Path) -> None:
        self.service_pid, self.pgdata = service_pid, pgdata

    def read(self) -> dict[str, float]:
        postmaster = int((self.pgdata / "postmaster.pid").read_text().split()[0])
        me = resource.getrusage(resource.RUSAGE_SELF)
        return {
            "service": cpu_seconds(process_tree(self.service_pid)),
            "postgres": cpu_seconds(process_tree(postmaster)),
            "load generator": me.ru_utime + me.ru_stime,
        }


class Writer(threading.Thread):
    """Commits ``rate`` new episodes per second for random users (never the probes) until stopped."""

    def __init__(self, url: str, counts: np.ndarray, rate: float, skip: set[int], lines: int = 0) -> None:
        super().__init__(daemon=True)
        self.url, self.counts, self.rate, self.skip, self.lines = url, counts, rate, skip, lines
        self.stop = threading.Event()
        self.written = self.failed = 0

    def run(self) -> None:
        rng = np.random.default_rng(99)
        conn = None
        while not self.stop.wait(1.0 / self.rate):
            u = int(rng.integers(len(self.counts)))
            if u in self.skip:
                continue
            try:
                if conn is None or conn.closed:
                    conn = psycopg.connect(self.url)
                    register_vector(conn)
                write_episode(conn, u, rng, dt.datetime(2026, 1, 1, tzinfo=dt.UTC), self.lines)
                self.written += 1
            except psycopg.Error:
                self.failed += 1
                conn = None  # the database restarts: reconnect on the next beat
        if conn is not None:
            conn.close()
