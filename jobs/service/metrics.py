"""Prometheus metrics of the memory service (prometheus-client), served at ``/metrics``.

- ``episodes_http_requests_total{method, route, status}`` and ``episodes_http_request_seconds{method, route}``:
  by route *template* (``/v1/episodes/{episode_id}``), never the raw path, so ids do not explode the series;
- ``episodes_queue_depth``: closed transcripts waiting to be summarised, read from the database at scrape time;
- ``episodes_gc_pause_seconds{generation}``: the cyclic garbage collector's passes, each of which stops the
  worker's every thread (a full pass over a large heap is a latency spike no route's histogram explains).

With ``--workers N`` > 1 the CLI gives every worker one private multiprocess directory
(prometheus-client's multiprocess mode, :func:`jobs.config.share_metrics_dir`), and a scrape of any
worker aggregates all of them: the figures are the whole service's, not one worker's.
"""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Callable, Iterable

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from jobs.config import metrics_dir

_GC_BUCKETS = (0.0005, 0.002, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0)
_BUCKETS = (0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class _QueueDepth(Collector):
    """Asks the database at scrape time; a scrape during an outage leaves the gauge out."""

    def __init__(self, read: Callable[[], int]) -> None:
        self.read = read

    def collect(self) -> Iterable[GaugeMetricFamily]:
        try:
            value = self.read()
        except Exception:
            return []
        return [GaugeMetricFamily("episodes_queue_depth", "Closed transcripts waiting to be summarised", value=value)]


class Metrics:
    """The service's metrics, in a registry of their own (several apps in one process stay apart)."""

    def __init__(self, queue_depth: Callable[[], int]) -> None:
        self.multiprocess = metrics_dir() is not None
        self.registry = CollectorRegistry(auto_describe=True)
        # In multiprocess mode values live in files; the registry used to scrape only aggregates them.
        own = None if self.multiprocess else self.registry
        self.requests = Counter("episodes_http_requests", "HTTP requests", ["method", "route", "status"], registry=own)
        self.latency = Histogram(
            "episodes_http_request_seconds", "HTTP request latency", ["method", "route"], buckets=_BUCKETS, registry=own
        )
        self.gc_pauses = Histogram(
            "episodes_gc_pause_seconds",
            "Garbage collector passes (every thread stops)",
            ["generation"],
            buckets=_GC_BUCKETS,
            registry=own,
        )
        self._gc_started = 0.0
        if self.multiprocess:
            MultiProcessCollector(self.registry)
        self.registry.register(_QueueDepth(queue_depth))

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        self.requests.labels(method, route, str(status)).inc()
        self.latency.labels(method, route).observe(seconds)

    def watch_gc(self) -> None:
        """Time the garbage collector's passes in this process until :meth:`unwatch_gc`."""
        gc.callbacks.append(self._on_gc)

    def unwatch_gc(self) -> None:
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":  # passes never nest: the collector runs one at a time, holding the GIL
            self._gc_started = time.perf_counter()
        else:
            self.gc_pauses.labels(str(info["generation"])).observe(time.perf_counter() - self._gc_started)

    def render(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


def mark_dead(pid: int | None = None) -> None:
    """Drop a finished worker's live gauges (multiprocess mode), as prometheus-client asks."""
    from prometheus_client import multiprocess

    if metrics_dir() is not None:
        multiprocess.mark_process_dead(pid or os.getpid())
