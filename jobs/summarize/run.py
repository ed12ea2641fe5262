"""The live summarize job: claim closed transcripts, extract, and finish — once each.

Workers claim with ``FOR UPDATE SKIP LOCKED`` and a lease (:mod:`jobs.summarize.claim`); the
model call happens with no database connection held; the episode is written by the one finish
path shared with Message Batches (:mod:`jobs.summarize.finish`), in one tenant-scoped transaction
that succeeds only while the worker still holds the lease. Failures go back to the queue with
exponential backoff and are dead-lettered after ``Settings.max_attempts``. One bad transcript
never stops the batch.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from jobs.config import Settings
from jobs.db import Database, notify_eligible, one
from jobs.embeddings import BatchingEmbedder, Embedder, embedder_for
from jobs.errors import ConfigError, EpisodesError, ModelError, PermanentExtractionError
from jobs.extract import Extractor
from jobs.faults import crash_point
from jobs.models import ExtractionResult, Transcript, split_offered
from jobs.runs import finish_run, start_run, worker_id
from jobs.sql import query
from jobs.summarize.claim import Claimer, LeaseKeeper
from jobs.summarize.finish import Finisher
from jobs.summarize.report import RunReport, StageClock

log = logging.getLogger(__name__)


class Summarizer:
    """Processes eligible transcripts; safe to run in many threads, processes and machines at once."""

    def __init__(
        self, db: Database, extractor: Extractor, *, embedder: Embedder | None = None,
        worker: str | None = None, job_run_id: int | None = None,
    ) -> None:
        self.db = db
        self.settings: Settings = db.settings
        self.extractor = extractor
        self.embedder = embedder or embedder_for(self.settings)
        self.worker = worker or worker_id()
        self.job_run_id = job_run_id
        self.stop = threading.Event()
        self.closed = threading.Event()
        self.clock = StageClock()
        self.finisher = Finisher(db, self.embedder, job_run_id, self.clock)
        self.leases = LeaseKeeper(db, self.worker, self.settings, self.closed)
        self.claimer = Claimer(db, owner=self.worker, lease_seconds=self.settings.lease_seconds)

    def close(self) -> None:
        """Stop the lease keeper's thread (the summarizer is not used after this)."""
        self.closed.set()

    def claim(self, tenant: str | None = None, since: dt.datetime | None = None) -> Transcript | None:
        return self.claimer.claim(tenant, since)

    def process(self, transcript: Transcript) -> str:
        """Summarise one claimed transcript; return done | skipped | failed | dead | lost."""
        end = self.finisher
        if transcript.attempts > self.settings.max_attempts:
            # Claimed again and again without finishing: workers died on it. Dead-letter, don't loop.
            return end.fail(transcript, "abandoned by workers too many times (crashed or timed out)",
                            owner=self.worker, permanent=True)
        with self.clock("prepare"):
            open_items = end.prepare(transcript, self.extractor.prompt_version, owner=self.worker)
        if open_items is None:
            return "skipped"
        result: ExtractionResult | None = None
        crash_point("after_claim")
        try:
            with self.leases.held(transcript), self.clock("extract"):
                result = self.extractor.extract(transcript, open_items)
            crash_point("after_model_call")
            items, decisions = split_offered(open_items)
            return end.finish(transcript, result, [i.event_id for i in items], owner=self.worker,
                              offered_decisions=[i.event_id for i in decisions])
        except ConfigError:
            end.release(transcript, owner=self.worker, calls=result.calls if result else ())
            raise
        except ModelError as exc:  # the error carries the calls made before it, failed ones included
            return end.fail(transcript, str(exc), owner=self.worker, calls=exc.calls,
                            permanent=isinstance(exc, PermanentExtractionError))
        except EpisodesError as exc:
            return end.fail(transcript, str(exc), owner=self.worker, calls=result.calls if result else ())
        except Exception as exc:  # noqa: BLE001 - one bad transcript never stops the batch
            log.exception("unexpected failure", extra={"action": "summarize_error", "transcript_id": transcript.id})
            return end.fail(transcript, f"{type(exc).__name__}: {exc}", owner=self.worker,
                            calls=result.calls if result else ())


def run_summarize(
    db: Database,
    *,
    extractor: Extractor,
    limit: int | None = None,
    tenant: str | None = None,
    since: dt.datetime | None = None,
    concurrency: int = 1,
    progress: Callable[[int], object] | None = None,
    embedder: Embedder | None = None,
    job: str = "summarize",
) -> RunReport:
    """Process eligible transcripts until none is left (or ``limit`` were claimed)."""
    report = RunReport()
    started = time.perf_counter()
    worker = worker_id()
    run_id = start_run(db, job, worker)
    embedder = embedder or embedder_for(db.settings)
    if concurrency > 1:
        embedder = BatchingEmbedder(embedder)
    summarizer = Summarizer(db, extractor, embedder=embedder, worker=worker, job_run_id=run_id)
    lock = threading.Lock()
    claimed = 0
    fatal: list[BaseException] = []

    def loop() -> None:
        nonlocal claimed
        while not summarizer.stop.is_set():
            with lock:
                if limit is not None and claimed >= limit:
                    return
                claimed += 1
            with summarizer.clock("claim"):
                transcript = summarizer.claim(tenant, since)
            if transcript is None:
                return
            try:
                outcome = summarizer.process(transcript)
            except ConfigError as exc:  # a setting is wrong: every transcript would fail the same way
                fatal.append(exc)
                summarizer.stop.set()
                return
            with lock:
                report.counts[outcome] += 1
            if progress:
                progress(1)

    workers = max(1, concurrency)
    try:
        if workers == 1:
            loop()
        else:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="summarize") as pool:
                for future in [pool.submit(loop) for _ in range(workers)]:
                    future.result()
    finally:
        summarizer.close()
        report.seconds = time.perf_counter() - started
        report.stage_seconds = dict(summarizer.clock.seconds)
        with db.admin() as conn:
            totals = one(conn.execute(query("job_run_model_totals"), {"job_run_id": run_id}))
        report.input_tokens, report.output_tokens = int(totals["i"]), int(totals["o"])
        report.cache_read_tokens, report.cost_usd = int(totals["c"]), float(totals["usd"])
        finish_run(db, run_id, counts=report.counts, error=fatal[0] if fatal else None)
    if fatal:
        raise fatal[0]
    return report


def count_eligible(db: Database, tenant: str | None = None, since: dt.datetime | None = None) -> int:
    with db.admin() as conn:
        return int(one(conn.execute(query("count_eligible"), {"tenant": tenant, "since": since}))["n"])


def retry_dead(db: Database, tenant: str | None = None) -> int:
    with db.admin() as conn:
        n = len(conn.execute(query("retry_dead"), {"tenant": tenant}).fetchall())
        if n:
            notify_eligible(conn, tenant or "")
        return n
