"""`episodes serve`: the long-running scheduler.

* Summarize workers (``--concurrency`` threads of :class:`jobs.summarize.worker.Worker`, the worker of
  `episodes run` driven for ever) sleep when the queue is empty until woken: by ``LISTEN`` on the channel
  that every path making a transcript eligible notifies (:func:`jobs.db.notify_eligible`; ingest,
  idle close, lease rescue, retries and claims given back: sub-second pickup), or by the interval
  poll (an APScheduler job; the fallback when a notification is missed, and for host applications
  that insert transcripts themselves without notifying).
  Every process connects to the same server (on Citus, the coordinator), so ``LISTEN``/``NOTIFY``
  and the advisory locks below are shared by all of them.
* Maintenance (APScheduler interval job, singleton by advisory lock): rescues claims whose lease
  expired (dead workers), closes idle sessions (``--idle-close``), prunes old job runs and the
  week-old entries of the episode deletion log (migration 0006), and removes the message bodies of
  summarised transcripts past ``EPISODES_TRANSCRIPT_RETENTION`` (:mod:`jobs.lifecycle.retention`).
* Compress (APScheduler cron job, yearly by default, singleton by advisory lock).
* Prune by policy, only when ``EPISODES_PRUNE_POLICY`` is set (cron job, ``EPISODES_PRUNE_CRON``,
  daily by default; singleton by advisory lock, so two processes never prune at once):
  :mod:`jobs.lifecycle.policy`.

Any number of ``serve`` processes on any number of machines can share one database: claims use
``FOR UPDATE SKIP LOCKED`` and singleton jobs ``pg_try_advisory_lock``. SIGTERM / SIGINT stop
claiming, let in-flight work finish within ``--shutdown-deadline``, then release what is left.
"""

from __future__ import annotations

import datetime as dt
import logging
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from jobs.compress.run import scheduled_compress
from jobs.config import Settings
from jobs.db import ELIGIBLE_CHANNEL, Conn, Database, notify_eligible, one
from jobs.embeddings import BatchingEmbedder, embedder_for
from jobs.embeddings.recorded import check_recorded
from jobs.errors import EmbedderChanged, EpisodesError
from jobs.extract import Extractor
from jobs.lifecycle.policy import apply_policy
from jobs.lifecycle.retention import prune_transcripts
from jobs.runs import finish_run, start_run, worker_id
from jobs.sql import query
from jobs.summarize import Summarizer
from jobs.summarize.worker import Worker

log = logging.getLogger(__name__)

CHANNEL = ELIGIBLE_CHANNEL
MAINTENANCE_LOCK = 0x65700001
COMPRESS_LOCK = 0x65700002
PRUNE_LOCK = 0x65700003
CLAUDE_CODE_SYNC_SECONDS = 300.0  # the SessionEnd hook hands sessions over at once; this catches what it missed


@dataclass(frozen=True)
class ServeOptions:
    concurrency: int = 4
    poll_seconds: float = 10.0
    maintenance_seconds: float = 30.0
    compress_cron: str = "0 3 1 1 *"  # 03:00 UTC on 1 January
    idle_close_seconds: float | None = None
    shutdown_deadline: float = 30.0
    job_run_retention_days: int = 30
    # Claude Code sessions on this machine stored every CLAUDE_CODE_SYNC_SECONDS (`serve --claude-code-sync`):
    # (tenant, user) as `episodes claude-code install` was given them; None: not synced here.
    claude_code: tuple[str, str] | None = None

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> ServeOptions:
        """The options from Settings (EPISODES_SERVE_CONCURRENCY, EPISODES_COMPRESS_CRON, ...),
        with each override that is not None (a command-line flag) taking precedence."""
        chosen: dict[str, Any] = {
            "concurrency": settings.serve_concurrency,
            "poll_seconds": settings.poll_seconds,
            "maintenance_seconds": settings.maintenance_seconds,
            "compress_cron": settings.compress_cron,
            "idle_close_seconds": settings.idle_close_seconds,
            "shutdown_deadline": settings.shutdown_deadline_seconds,
        }
        chosen.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**chosen)


class Server:
    def __init__(
        self,
        db: Database,
        extractor: Extractor,
        options: ServeOptions,
        compress: Callable[[Database], dict[str, int]] = scheduled_compress,
    ) -> None:
        self.db = db
        self.options = options
        self.worker = worker_id()
        embedder = embedder_for(db.settings)
        self.summarizer = Summarizer(
            db,
            extractor,
            worker=self.worker,
            embedder=BatchingEmbedder(embedder) if options.concurrency > 1 else embedder,
        )
        self.summarizer.finisher.stored_level = logging.INFO  # one line per session summarised
        # The summarize worker of `episodes run` too, driven for ever: a thread with nothing to claim sleeps
        # until woken (NOTIFY) or the poll.
        self.summarize = Worker(self.summarizer, threads=options.concurrency, idle=self._sleep)
        self.compress_fn = compress
        self.stopping = threading.Event()
        self._wake = threading.Condition()
        self._pending_wakes = 0
        self.scheduler = BackgroundScheduler(timezone="UTC")
        self.fatal: EpisodesError | None = None  # why serving stopped on its own (raised by run)

    # --- waking -----------------------------------------------------------------------------

    def wake(self) -> None:
        with self._wake:
            self._pending_wakes += 1
            self._wake.notify_all()

    def _sleep(self) -> None:
        with self._wake:
            if self._pending_wakes == 0 and not self.stopping.is_set():
                self._wake.wait(timeout=self.options.poll_seconds)
            self._pending_wakes = 0

    # --- listener ---------------------------------------------------------------------------

    def _listen(self) -> None:
        backoff = 1.0
        while not self.stopping.is_set():
            try:
                with psycopg.connect(
                    self.db.url, autocommit=True, application_name=self.db.settings.application_name
                ) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    log.info("listening", extra={"action": "listen", "channel": CHANNEL})
                    backoff = 1.0
                    self.wake()  # catch up on anything that arrived while not listening
                    while not self.stopping.is_set():
                        for _ in conn.notifies(timeout=0.5, stop_after=1):
                            self.wake()
            except psycopg.Error as exc:
                if self.stopping.is_set():
                    return
                log.warning("listener lost its connection: %s", exc, extra={"action": "listen_error"})
                time.sleep(backoff)
                backoff = min(backoff * 2, 30.0)

    # --- singleton jobs ---------------------------------------------------------------------

    def _singleton(self, key: int, job: str, fn: Callable[[Conn], dict[str, int]]) -> dict[str, int] | None:
        """Run ``fn`` if no other process runs this job now (session advisory lock); record the run."""
        with self.db.connect(autocommit=True) as conn:
            if not one(conn.execute(query("try_advisory_lock"), {"key": key}))["ok"]:
                log.debug("another process runs %s", job, extra={"action": "singleton_skip", "job": job})
                return None
            run_id = start_run(conn, job, self.worker)
            try:
                counts = fn(conn)
            except Exception as exc:
                finish_run(conn, run_id, counts={}, error=exc)
                log.exception("%s failed", job, extra={"action": f"{job}_error"})
                return None
            finally:
                conn.execute(query("advisory_unlock"), {"key": key})
            finish_run(conn, run_id, counts=counts)
            return counts

    def maintenance(self) -> dict[str, int] | None:
        def work(conn: Conn) -> dict[str, int]:
            counts = {"rescued": len(conn.execute(query("rescue_expired_leases")).fetchall())}
            if self.options.idle_close_seconds:
                counts["idle_closed"] = len(
                    conn.execute(query("idle_close"), {"idle_seconds": self.options.idle_close_seconds}).fetchall()
                )
            counts["pruned_runs"] = len(
                conn.execute(query("prune_job_runs"), {"days": self.options.job_run_retention_days}).fetchall()
            )
            if counts["rescued"] or counts.get("idle_closed"):
                notify_eligible(conn)
            if self.db.settings.transcript_retention_seconds:  # EPISODES_TRANSCRIPT_RETENTION
                counts["pruned_transcripts"] = prune_transcripts(
                    self.db, self.db.settings.transcript_retention_seconds
                ).transcripts
            if counts["rescued"]:
                log.warning("rescued %d expired claims", counts["rescued"], extra={"action": "lease_rescue"})
            return counts

        return self._singleton(MAINTENANCE_LOCK, "maintenance", work)

    def check_embedder(self) -> None:
        """Stop serving, clearly, once `episodes reembed` switched the database to another embedder:
        vectors of this process's embedder no longer belong there (jobs.embeddings.recorded)."""
        try:
            with self.db.admin() as conn:
                check_recorded(conn, self.summarizer.embedder, self.db.settings.embedder)
        except EmbedderChanged as exc:
            log.error("%s", exc, extra={"action": "embedder_changed"})
            self.fatal = exc
            self.stop()

    def compress(self) -> dict[str, int] | None:
        return self._singleton(COMPRESS_LOCK, "compress", lambda conn: self.compress_fn(self.db))

    def prune(self) -> dict[str, int] | None:
        """Apply EPISODES_PRUNE_POLICY once (None: not configured, or another process is pruning)."""
        policy = self.db.settings.prune_policy
        if policy is None:
            return None

        def work(conn: Conn) -> dict[str, int]:
            report = apply_policy(self.db, policy)
            return {
                "pruned_episodes": report.deleted,
                "kept": report.plan.kept,
                "pinned": report.plan.pinned,
                **{f"supers_{outcome}": n for outcome, n in report.rebuilt.items()},
            }

        return self._singleton(PRUNE_LOCK, "prune", work)

    # --- lifecycle --------------------------------------------------------------------------

    def claude_code_sync(self) -> None:
        """Store this machine's finished Claude Code sessions not yet stored (`episodes claude-code sync`):
        those whose SessionEnd hook could not hand them over (database down, a crash, a killed terminal)."""
        if self.options.claude_code is None:
            return
        from jobs.claude_code import local
        from jobs.claude_code.places import claude_home
        from jobs.claude_code.sync import session_files, sync

        tenant, user = self.options.claude_code
        try:
            report = sync(
                local.sync_store(self.db, tenant),
                session_files(claude_home() / "projects"),
                tenant_id=tenant,
                user_id=user,
                idle_close_seconds=self.options.idle_close_seconds,
            )
        except (EpisodesError, OSError) as exc:
            log.warning("claude code sync failed: %s", exc, extra={"action": "claude_code_sync"})
            return
        if report.stored or report.rejected:
            log.info(
                "claude code sessions stored",
                extra={
                    "action": "claude_code_sync",
                    "stored": report.stored,
                    "rejected": len(report.rejected),
                    "still_open": report.open,
                },
            )

    @property
    def counts(self) -> Counter[str]:
        """The summarize outcomes so far (done, failed, dead, skipped, lost, error)."""
        return self.summarize.counts

    def stop(self, *_: object) -> None:
        if not self.stopping.is_set():
            log.info("stopping: no new claims; finishing in-flight work", extra={"action": "shutdown"})
        self.stopping.set()
        self.summarize.stop()
        with self._wake:
            self._wake.notify_all()

    def run(self, install_signals: bool = True) -> Counter[str]:
        if install_signals:
            signal.signal(signal.SIGTERM, self.stop)
            signal.signal(signal.SIGINT, self.stop)
        o = self.options
        self.scheduler.add_job(
            self.wake, IntervalTrigger(seconds=o.poll_seconds), id="poll", max_instances=1, coalesce=True
        )
        self.check_embedder()
        if self.fatal:
            raise self.fatal
        self.scheduler.add_job(
            self.check_embedder, IntervalTrigger(seconds=o.poll_seconds), id="embedder", max_instances=1, coalesce=True
        )
        self.scheduler.add_job(
            self.maintenance,
            IntervalTrigger(seconds=o.maintenance_seconds),
            id="maintenance",
            max_instances=1,
            coalesce=True,
        )
        self.scheduler.add_job(
            self.compress,
            CronTrigger.from_crontab(o.compress_cron, timezone="UTC"),
            id="compress",
            max_instances=1,
            coalesce=True,
        )
        if o.claude_code is not None:
            self.scheduler.add_job(
                self.claude_code_sync,
                IntervalTrigger(seconds=CLAUDE_CODE_SYNC_SECONDS),
                id="claude_code_sync",
                max_instances=1,
                coalesce=True,
                next_run_time=dt.datetime.now(dt.UTC),
            )
        if self.db.settings.prune_policy is not None:
            self.scheduler.add_job(
                self.prune,
                CronTrigger.from_crontab(self.db.settings.prune_cron, timezone="UTC"),
                id="prune",
                max_instances=1,
                coalesce=True,
            )
        # Load the embedding model before taking work, so the first session after a start does not
        # wait for it (it takes seconds).
        self.summarizer.embedder.embed(["warm up"])
        self.scheduler.start()
        threading.Thread(target=self._listen, name="listen", daemon=True).start()
        self.summarize.start()
        log.info("serving", extra={"action": "serve_start", "worker": self.worker, "concurrency": o.concurrency})
        self.maintenance()
        while not self.stopping.wait(0.5):
            if self.summarize.fatal is not None:  # a wrong setting: every session would fail the same way
                log.error("configuration error: %s", self.summarize.fatal, extra={"action": "config_error"})
                if isinstance(self.summarize.fatal, EpisodesError):
                    self.fatal = self.fatal or self.summarize.fatal
                self.stop()
        self.scheduler.shutdown(wait=False)
        self.summarize.join(o.shutdown_deadline)
        # Give unfinished claims back now (waking other processes), not at lease expiry.
        released = self.summarize.release()
        log.info("stopped", extra={"action": "serve_stop", "released": released, **dict(self.counts)})
        if self.fatal:
            raise self.fatal
        return self.counts
