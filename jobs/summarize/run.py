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
from jobs.summarize.worker import Worker

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


INTERRUPT_GRACE_SECONDS = 3.0
"""After an interrupt, how long sessions in flight may take to finish before their claims are given
back (a Ctrl-C means stop: a model call that has not answered by then is abandoned)."""


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
    interrupt: threading.Event | None = None,
    grace_seconds: float = INTERRUPT_GRACE_SECONDS,
) -> RunReport:
    """Process eligible transcripts until none is left (or ``limit`` were claimed).

    ``interrupt`` set (the CLI sets it on SIGINT / SIGTERM), or a KeyboardInterrupt here: no new
    claims; sessions in flight get ``grace_seconds`` to finish, then their claims are given back; the
    run is recorded as interrupted and ``RunReport.interrupted`` is set (a KeyboardInterrupt is raised
    again once that is done)."""
    report = RunReport()
    started = time.perf_counter()
    worker_name = worker_id()
    run_id = start_run(db, job, worker_name)
    embedder = embedder or embedder_for(db.settings)
    if concurrency > 1:
        embedder = BatchingEmbedder(embedder)
    summarizer = Summarizer(db, extractor, embedder=embedder, worker=worker_name, job_run_id=run_id)
    worker = Worker(summarizer, threads=concurrency, tenant=tenant, since=since, limit=limit, progress=progress)
    keyboard = False
    try:
        worker.start()
        try:
            while not worker.join(0.2):
                if interrupt is not None and interrupt.is_set():
                    report.interrupted = True
                    break
        except KeyboardInterrupt:
            report.interrupted = keyboard = True
        if report.interrupted:
            worker.stop()
            worker.join(grace_seconds)
    finally:
        worker.stop()
        report.released = worker.release()
        report.counts = worker.counts
        report.seconds = time.perf_counter() - started
        report.stage_seconds = dict(summarizer.clock.seconds)
        with db.admin() as conn:
            totals = one(conn.execute(query("job_run_model_totals"), {"job_run_id": run_id}))
        report.input_tokens, report.output_tokens = int(totals["i"]), int(totals["o"])
        report.cache_read_tokens, report.cost_usd = int(totals["c"]), float(totals["usd"])
        report.model_calls, report.failed_calls = int(totals["calls"]), int(totals["failed"])
        report.call_error = totals["an_error"]
        error: BaseException | str | None = worker.fatal
        if error is None and report.all_calls_failed:
            error = report.failure()
        finish_run(db, run_id, counts=report.counts, error=error)
        if report.interrupted and error is None:
            with db.admin() as conn:
                conn.execute(query("job_run_interrupted"), {"id": run_id})
    if keyboard:
        raise KeyboardInterrupt
    if worker.fatal is not None:
        raise worker.fatal
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
