"""`episodes run`: summarise every eligible transcript once, with the summarize worker
(:mod:`jobs.summarize.worker`) driven until the queue is empty, and record the run; how the queue
is counted and dead letters requeued.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable

from jobs.db import Database, notify_eligible, one
from jobs.embeddings import BatchingEmbedder, Embedder, embedder_for
from jobs.extract import Extractor
from jobs.llm.spend import backend_of, estimate_cost
from jobs.runs import finish_run, start_run, worker_id
from jobs.sql import query
from jobs.summarize.report import RunReport
from jobs.summarize.summarizer import Summarizer
from jobs.summarize.worker import Worker

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
        if worker.held is not None and not report.interrupted:
            report.held_reason, report.held = worker.held, count_eligible(db, tenant, since)
        report.seconds = time.perf_counter() - started
        report.stage_seconds = dict(summarizer.clock.seconds)
        with db.admin() as conn:
            totals = one(conn.execute(query("job_run_model_totals"), {"job_run_id": run_id}))
        report.input_tokens, report.output_tokens = int(totals["i"]), int(totals["o"])
        report.cache_read_tokens, report.cost_usd = int(totals["c"]), float(totals["usd"])
        report.model_calls, report.failed_calls = int(totals["calls"]), int(totals["failed"])
        report.call_error = totals["an_error"]
        report.priced = estimate_cost(extractor.name, 0, 0) is not None
        report.backend = backend_of(extractor.name)
        report.model_failures, report.model_failure = summarizer.model_failures, summarizer.model_failure
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
