"""The fake Anthropic server's timings through the real `anthropic` SDK: the figures tests/test_fake_anthropic.py
used to assert on the clock (it now checks behaviour: the wait the SDK chose, the kind of timeout, how many requests
were in flight at once).

    python bench/fake_anthropic.py [--runs 3] [--concurrent 32] [--latency 1.0]

- retry-after 1 s: a 429 with ``retry-after: 1`` then an answer; the wall time of the call (about 1 s plus two
  round trips when the SDK honours the header; its own first backoff is 0.375-0.5 s).
- hang against a 0.3 s timeout: a request the server holds for 10 s; the wall time until the SDK's timeout error
  (about 0.3 s; a client that waited for the server would take 10 s).
- N concurrent requests of L seconds each: the wall time of all of them from N threads, and the most the server
  had in flight at once (a concurrent server: about L and N; one at a time: N x L and 1).

Medians of ``--runs``; each run uses a new server.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import _common  # noqa: F401  (puts tests/ on the path, where the fake server lives)
import anthropic
from support.fake_anthropic import FakeAnthropic, hang, rate_limited, text

MODEL = "claude-haiku-4-5"
HELLO = [{"role": "user", "content": "hello"}]


def _ask(client: anthropic.Anthropic) -> None:
    client.messages.create(model=MODEL, max_tokens=16, messages=HELLO)  # type: ignore[arg-type]


def retry_after(fake: FakeAnthropic) -> float:
    fake.enqueue(rate_limited(retry_after=1.0), text("after the wait"))
    with anthropic.Anthropic(base_url=fake.base_url, api_key="bench", max_retries=2, timeout=30) as client:
        started = time.perf_counter()
        _ask(client)
        return time.perf_counter() - started


def hang_timeout(fake: FakeAnthropic) -> float:
    fake.enqueue(hang(10.0))
    with anthropic.Anthropic(base_url=fake.base_url, api_key="bench", max_retries=0, timeout=0.3) as client:
        started = time.perf_counter()
        try:
            _ask(client)
        except anthropic.APITimeoutError:
            return time.perf_counter() - started
    raise SystemExit("the hang was answered before the client's timeout: the fake server does not hang")


def concurrent(fake: FakeAnthropic, count: int, latency: float) -> float:
    fake.latency = latency
    with (
        anthropic.Anthropic(base_url=fake.base_url, api_key="bench", max_retries=0, timeout=count * latency + 30) as c,
        ThreadPoolExecutor(max_workers=count) as pool,
    ):
        started = time.perf_counter()
        list(pool.map(lambda _: _ask(c), range(count)))
        return time.perf_counter() - started


def _median_of(runs: int, measure: Callable[[FakeAnthropic], float]) -> tuple[float, int]:
    """The median seconds of ``runs`` measurements, each on a new server, and the most in flight at once."""
    seconds, peak = [], 0
    for _ in range(runs):
        with FakeAnthropic() as fake:
            seconds.append(measure(fake))
            peak = max(peak, fake.peak_in_flight)
    return statistics.median(seconds), peak


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--concurrent", type=int, default=32, help="requests sent at once")
    parser.add_argument("--latency", type=float, default=1.0, help="seconds the server takes per request")
    args = parser.parse_args(argv)
    waited, _ = _median_of(args.runs, retry_after)
    print(f"retry-after 1 s: the call took {waited:.3f} s (median of {args.runs})")
    timed_out, _ = _median_of(args.runs, hang_timeout)
    print(f"a 10 s hang against a 0.3 s timeout: the error after {timed_out:.3f} s (median of {args.runs})")
    wall, peak = _median_of(args.runs, lambda fake: concurrent(fake, args.concurrent, args.latency))
    print(
        f"{args.concurrent} concurrent requests of {args.latency:g} s: all answered in {wall:.3f} s "
        f"(one at a time: {args.concurrent * args.latency:g} s), at most {peak} in flight at once "
        f"(median of {args.runs})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
