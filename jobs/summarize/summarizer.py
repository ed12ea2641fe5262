"""One transcript claimed, extracted and finished: the unit of work of the summarize job.

Workers claim with ``FOR UPDATE SKIP LOCKED`` and a lease (:mod:`jobs.summarize.claim`); the
model call happens with no database connection held; the episode is written by the one finish
path shared with Message Batches (:mod:`jobs.summarize.finish`), in one tenant-scoped transaction
that succeeds only while the worker still holds the lease. Failures go back to the queue with
exponential backoff and are dead-lettered after ``Settings.max_attempts``. One bad transcript
never stops the batch. The threads that drive it are :mod:`jobs.summarize.worker`'s.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading

from jobs.config import Settings
from jobs.db import Database
from jobs.embeddings import Embedder, embedder_for
from jobs.errors import ConfigError, EpisodesError, ModelError, PermanentExtractionError
from jobs.extract import Extractor
from jobs.faults import crash_point
from jobs.models import ExtractionResult, Transcript, split_offered
from jobs.runs import worker_id
from jobs.summarize.claim import Claimer, LeaseKeeper
from jobs.summarize.finish import Finisher
from jobs.summarize.report import StageClock

log = logging.getLogger(__name__)


class Summarizer:
    """Processes eligible transcripts; safe to run in many threads, processes and machines at once."""

    def __init__(
        self,
        db: Database,
        extractor: Extractor,
        *,
        embedder: Embedder | None = None,
        worker: str | None = None,
        job_run_id: int | None = None,
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
        self.model_failures = 0  # sessions failed by the model's answer or call (or an unexpected error)
        self.model_failure: str | None = None  # the first one's reason, one line
        self._failures_lock = threading.Lock()

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
            return end.fail(
                transcript,
                "abandoned by workers too many times (crashed or timed out)",
                owner=self.worker,
                permanent=True,
            )
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
            return end.finish(
                transcript,
                result,
                [i.event_id for i in items],
                owner=self.worker,
                offered_decisions=[i.event_id for i in decisions],
            )
        except ConfigError:
            end.release(transcript, owner=self.worker, calls=result.calls if result else ())
            raise
        except ModelError as exc:  # the error carries the calls made before it, failed ones included
            self._failed_by_model(str(exc))
            return end.fail(
                transcript,
                str(exc),
                owner=self.worker,
                calls=exc.calls,
                permanent=isinstance(exc, PermanentExtractionError),
            )
        except EpisodesError as exc:
            return end.fail(transcript, str(exc), owner=self.worker, calls=result.calls if result else ())
        except Exception as exc:
            log.exception("unexpected failure", extra={"action": "summarize_error", "transcript_id": transcript.id})
            self._failed_by_model(f"{type(exc).__name__}: {exc}")
            return end.fail(
                transcript, f"{type(exc).__name__}: {exc}", owner=self.worker, calls=result.calls if result else ()
            )

    def _failed_by_model(self, reason: str) -> None:
        """Count a session the model's answer or call failed (`episodes run` then exits 1, issue 46 #14)."""
        with self._failures_lock:
            self.model_failures += 1
            if self.model_failure is None:
                self.model_failure = " ".join(reason.split())[:300]
