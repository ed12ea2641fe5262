"""The one summarize worker of `episodes run` and `episodes serve`: threads that claim a transcript,
process it and count the outcome, driven until the queue is empty (``run``) or for ever (``serve``).

Stopping is the same for both: :meth:`Worker.stop` makes every thread stop claiming at once; the
threads finish what they hold; whoever stops the worker waits a while for them (:meth:`Worker.join`)
and then gives back what is still held (:meth:`Worker.release`), so nothing is left ``running``
until its lease expires. A thread that is still in a model call when its claim is given back finds
the claim gone when it returns, and writes nothing (``lost``).

A row whose messages cannot be read (INSERTed by hand in no shape ingest accepts) is dead-lettered
with its reason when it is claimed, and the worker claims on: one bad row never stops the batch.

The daily cap (``EPISODES_DAILY_TOKEN_CAP``, ``EPISODES_DAILY_SESSION_CAP``; :class:`jobs.llm.spend.DailyCap`)
is asked before each claim. Once the back end's spend for the UTC day reaches it, no thread claims:
``run`` ends and reports the sessions held (:attr:`Worker.held`), ``serve`` logs it once and idles
until the next day, and the queued sessions wait, untouched, for the day after.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
import threading
import time
from collections import Counter
from collections.abc import Callable

import psycopg

from jobs.errors import ConfigError, ModelUnreachable
from jobs.llm.spend import CapGauge, DailyCap, backend_of, day_start, next_day, spend_and_in_flight
from jobs.models import Transcript
from jobs.summarize.claim import UnreadableTranscript
from jobs.summarize.summarizer import Summarizer

log = logging.getLogger(__name__)

RETRY = "retry"  # _step's outcome when its claim was given back to wait for room under the token cap
CAP_RECHECK_SECONDS = 1.0  # how long a worker waits for the sessions in progress before it claims again
UNREACHABLE_RETRY_SECONDS = 30.0  # serve: wait after the model server refused a connection before the next claim
CLAIM_RETRY_SECONDS = 1.0  # serve: wait after a failed claim (the database restarting) before the next


class Worker:
    """``threads`` threads of one :class:`Summarizer`.

    ``idle``: what a thread does when nothing is left to claim. None (``episodes run``): it ends. A
    function (``episodes serve``): it is called (it sleeps until woken or the poll) and the thread
    claims again, until stopped; then errors other than a wrong setting are logged and survived too.
    ``limit``: claims at most this many; ``progress`` is called with 1 for every outcome."""

    def __init__(
        self,
        summarizer: Summarizer,
        *,
        threads: int = 1,
        tenant: str | None = None,
        since: dt.datetime | None = None,
        limit: int | None = None,
        progress: Callable[[int], object] | None = None,
        idle: Callable[[], object] | None = None,
    ) -> None:
        self.summarizer = summarizer
        self.threads = max(1, threads)
        self.tenant, self.since, self.limit = tenant, since, limit
        self.progress = progress
        self.idle = idle
        self.fatal: BaseException | None = None  # why the worker stopped on its own (a wrong setting; run: any error)
        self._counts: Counter[str] = Counter()
        self._in_flight: dict[int, Transcript] = {}  # by id: the claims the threads hold
        self._claimed = 0
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        cap = DailyCap.from_settings(summarizer.settings, backend_of(summarizer.extractor.name))
        self.cap = CapGauge(cap, summarizer.db) if cap is not None else None
        self.held: str | None = None  # why claiming stopped for the day (the cap reached), if it did
        self._cap_lock = threading.Lock()  # one cap check at a time, so two threads cannot both take the last session
        self._claiming = 0  # sessions let past the cap whose claim is not yet in _in_flight
        self._held_logged: object = None  # the day whose hold was logged (serve logs it once a day)

    @property
    def stopping(self) -> threading.Event:
        return self.summarizer.stop

    @property
    def counts(self) -> Counter[str]:
        """The outcomes so far (done, failed, dead, skipped, lost, error), a copy."""
        with self._lock:
            return Counter(self._counts)

    def start(self) -> None:
        """Start the threads (daemon threads: a thread stuck in a model call never keeps the process alive)."""
        self._threads = [
            threading.Thread(target=self._loop, name=f"summarize-{i}", daemon=True) for i in range(self.threads)
        ]
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        """No new claims from now on; the threads finish what they hold."""
        self.stopping.set()

    def alive(self) -> bool:
        return any(thread.is_alive() for thread in self._threads)

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the threads, at most ``timeout`` seconds in all; whether they all ended."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in self._threads:
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return not self.alive()

    def release(self) -> int:
        """Give back every claim still held (after :meth:`stop` and :meth:`join`), due again at once;
        how many. The lease keeper stops first, so no lease is extended after this."""
        self.summarizer.close()
        with self._lock:
            held = list(self._in_flight.values())
        for transcript in held:
            self.summarizer.finisher.release(transcript, owner=self.summarizer.worker)
        return len(held)

    # --- one thread -----------------------------------------------------------------------------

    def _loop(self) -> None:
        while not self.stopping.is_set():
            if not self._take_turn():
                return
            try:
                outcome = self._step()
            except ModelUnreachable as exc:  # given back uncounted; a stopped local server may come back
                if self.idle is None:
                    self._stop_with(exc)
                    return
                log.warning(
                    "%s; trying again in %.0fs", exc, UNREACHABLE_RETRY_SECONDS, extra={"action": "model_unreachable"}
                )
                self._count("error")
                self.stopping.wait(UNREACHABLE_RETRY_SECONDS)
                continue
            except ConfigError as exc:  # a setting is wrong: every transcript would fail the same way
                self._stop_with(exc)
                return
            except Exception as exc:
                if self.idle is None:
                    self._stop_with(exc)
                    return
                if isinstance(exc, psycopg.Error):
                    log.error("claim failed: %s", exc, extra={"action": "claim_error"})
                else:
                    log.exception("worker error", extra={"action": "worker_error"})
                self._count("error")
                self.stopping.wait(CLAIM_RETRY_SECONDS)
                continue
            if outcome is None:
                if self.idle is None:
                    return
                self.idle()
            elif outcome == RETRY:
                with self._lock:
                    self._claimed -= 1  # given back: it did not count against the limit
            else:
                self._count(outcome)

    def _take_turn(self) -> bool:
        """Count a claim against ``limit``; False when the limit is reached."""
        with self._lock:
            if self.limit is not None and self._claimed >= self.limit:
                return False
            self._claimed += 1
            return True

    def _step(self) -> str | None:
        """Claim one transcript and process it; its outcome, or None when there was nothing to claim
        (or the day's cap is reached)."""
        summarizer = self.summarizer
        if not self._may_claim():
            with self._lock:
                self._claimed -= 1
            return None
        try:
            with summarizer.clock("claim"):
                transcript = summarizer.claim(self.tenant, self.since)
        except UnreadableTranscript as exc:
            self._unstarted()  # dead-lettered at the claim: no model call
            return summarizer.finisher.fail(exc.transcript, str(exc), owner=summarizer.worker, permanent=True)
        finally:
            with self._lock:
                self._claiming -= 1
        if transcript is None:
            self._unstarted()
            with self._lock:
                self._claimed -= 1  # nothing was claimed
            return None
        if self.cap is not None and (waiting := self._no_room(transcript)) is not None:
            return waiting
        with self._lock:
            self._in_flight[transcript.id] = transcript
        try:
            return summarizer.process(transcript)
        finally:
            with self._lock:
                self._in_flight.pop(transcript.id, None)

    def _may_claim(self) -> bool:
        """False when the day's cap is reached (then ``held`` says why); True reserves a place for one
        claim (``_claiming``), which :meth:`_step` gives back once the claim is made or not."""
        with self._cap_lock:
            if self.cap is not None:
                with self._lock:
                    pending = len(self._in_flight) + self._claiming
                reason = self.cap.check(in_flight=pending)
                if reason is not None:
                    self._hold(reason)
                    return False
            with self._lock:
                self._claiming += 1
            return True

    def _no_room(self, transcript: Transcript) -> str | None:
        """The caps, checked once a session is claimed and before its first call: today's recorded spend plus the
        sessions other workers (any process) are summarising now. Over a cap, the claim is given back (no attempt
        counted) and the outcome says what the thread does: None when the day's spend alone reached it (held),
        :data:`RETRY` after a short wait when the sessions in progress may still leave room. With nothing else in
        progress a session always starts, so however many workers claim at once, in however many processes (their
        claims are seen before their calls), the token cap is overshot by at most one session's tokens and the
        session cap not at all."""
        assert self.cap is not None
        cap = self.cap.cap
        db = self.summarizer.db
        with self._cap_lock:  # one check at a time in this process; the give-back is inside, seen by the next
            spent, others = spend_and_in_flight(db, cap.backend, transcript.tenant_id, transcript.id)
            reached = cap.reached(spent)
            reason = reached or cap.crowded(spent, others)
            if reason is None:
                return None
            self.summarizer.finisher.release(transcript, owner=self.summarizer.worker)
            self.cap.unstarted()
        if reached is not None:
            self._hold(reached)
            with self._lock:
                self._claimed -= 1  # given back: it did not count against the limit
            return None
        log.debug("%s: waiting", reason, extra={"action": "daily_cap_wait"})
        self.stopping.wait(CAP_RECHECK_SECONDS * random.uniform(0.5, 1.5))  # apart from another process's wait
        return RETRY

    def _unstarted(self) -> None:
        if self.cap is not None:
            with self._cap_lock:
                self.cap.unstarted()

    def _hold(self, reason: str) -> None:
        """Note the hold; log it once a day (serve checks again at every wake-up)."""
        today = day_start()
        with self._lock:
            self.held = reason
            first = self._held_logged != today
            self._held_logged = today
        if first:
            log.warning(
                "%s: no more sessions are taken until %s; the queue is held for then",
                reason,
                f"{next_day():%Y-%m-%d %H:%M} UTC",
                extra={"action": "daily_cap_reached", "backend": self.cap.cap.backend if self.cap else None},
            )

    def _count(self, outcome: str) -> None:
        with self._lock:
            self._counts[outcome] += 1
        if self.progress is not None:
            self.progress(1)

    def _stop_with(self, exc: BaseException) -> None:
        with self._lock:
            if self.fatal is None:
                self.fatal = exc
        self.stop()
