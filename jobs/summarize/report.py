"""What a summarize run reports: counts, tokens, cost, and the wall time spent per stage."""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from jobs.wording import counted


class StageClock:
    """Wall seconds per stage of the summarize loop, summed over episodes and threads.

    bench/summarize_throughput.py prints them per episode, so overhead is found by measurement."""

    def __init__(self) -> None:
        self.seconds: defaultdict[str, float] = defaultdict(float)
        self._lock = threading.Lock()

    @contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - started
            with self._lock:
                self.seconds[stage] += elapsed


WHAT_TO_CHECK = {  # per back end, when every call failed
    "anthropic": "Check ANTHROPIC_API_KEY, EPISODES_MODEL and ANTHROPIC_BASE_URL, and the model service's status",
    "openai": "Check that the server at OPENAI_BASE_URL is running and serves EPISODES_MODEL, and OPENAI_API_KEY",
    "claude-code": "Check that `claude` is on PATH and logged in (`claude /login`), and EPISODES_MODEL",
}


@dataclass
class RunReport:
    counts: Counter[str] = field(default_factory=Counter)
    stage_seconds: dict[str, float] = field(default_factory=dict)
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)
    model_calls: int = 0
    failed_calls: int = 0
    call_error: str | None = None  # one failed call's error
    interrupted: bool = False  # stopped by SIGINT / SIGTERM before the queue was empty
    released: int = 0  # claims given back when it stopped (due again at once)
    held_reason: str | None = None  # the daily cap reached (jobs.llm.spend.DailyCap): claiming stopped for the day
    held: int = 0  # sessions still queued when the cap stopped the run: held for the next day
    backend: str = "anthropic"  # the back end whose calls these are (jobs.llm.spend.backend_of)
    priced: bool = True  # False: the model has no known price (a local model), so the cost is unknown, not $0
    model_failures: int = 0  # sessions that failed in this run on the model's answer or call
    model_failure: str | None = None  # the first one's reason

    def model_failure_line(self) -> str:
        """Why `episodes run` exits 1 when some sessions failed on the model's answer or call."""
        return (
            f"{counted(self.model_failures, 'session')} failed on the model's answer or call in this run "
            f"(e.g. {self.model_failure or 'no error text'}); `episodes status` shows them, and the next run "
            "retries those not dead-lettered"
        )

    @property
    def done(self) -> int:
        return self.counts["done"]

    @property
    def all_calls_failed(self) -> bool:
        """The run called the model and not one call succeeded: a wrong key, model or endpoint, or an outage."""
        return self.model_calls > 0 and self.failed_calls == self.model_calls

    def failure(self) -> str:
        """What to tell the operator when every model call failed."""
        error = " ".join((self.call_error or "no error text").split())[:300]
        return (
            f"every model call of this run failed ({self.failed_calls} of {self.model_calls}, e.g. {error}). "
            f"{WHAT_TO_CHECK.get(self.backend, 'Check the back end and EPISODES_MODEL')}; "
            "the sessions stay queued for the next run"
        )

    def line(self) -> str:
        c = self.counts
        held = (
            f" · {counted(self.held, 'session')} held for tomorrow: {self.held_reason}"
            if self.held_reason is not None
            else ""
        )
        cost = f"est. cost ${self.cost_usd:.4f}" if self.priced or not self.model_calls else "cost unknown (no price)"
        return (
            f"done {c['done']} · failed {c['failed']} (will retry) · dead {c['dead']} · skipped {c['skipped']} · "
            f"tokens {self.input_tokens:,} in / {self.output_tokens:,} out ({self.cache_read_tokens:,} cached) · "
            f"{cost} · {self.seconds:.1f}s{held}"
        )
