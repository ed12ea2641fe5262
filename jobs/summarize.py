"""The summarize job: claim closed transcripts, extract, ground, embed, write — once each.

Workers claim with ``FOR UPDATE SKIP LOCKED`` and a lease; the model call happens with no
database connection held; the episode, its events and entities, the model-call rows and the
transcript's state change commit in one tenant-scoped transaction that succeeds only while the
worker still holds the lease. Failures go back to the queue with exponential backoff and are
dead-lettered after ``EPISODES_MAX_ATTEMPTS``. One bad transcript never stops the batch.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field

import psycopg
from psycopg.types.json import Jsonb

from jobs.config import Settings
from jobs.db import Database
from jobs.embeddings import BatchingEmbedder, Embedder, get_embedder
from jobs.errors import (
    ConfigError,
    EpisodesError,
    PermanentExtractionError,
    TransientModelError,
)
from jobs.extract import Extractor
from jobs.extract.grounding import ground
from jobs.faults import crash_point
from jobs.models import (
    MAX_OPEN_ITEMS,
    ExtractionResult,
    Message,
    OpenItem,
    Transcript,
    search_text,
)
from jobs.privacy import redact_messages
from jobs.runs import worker_id
from jobs.sql import query
from jobs.store import EpisodeRow, record_calls, write_session_episode

log = logging.getLogger(__name__)

RETRY_BASE_SECONDS = 30
RETRY_MAX_SECONDS = 3600


def make_extractor(settings: Settings, name: str | None = None) -> Extractor:
    """The extractor by name: anthropic, offline, or auto (anthropic when a key is configured)."""
    chosen = name or settings.resolved_extractor
    if chosen == "auto":
        chosen = settings.resolved_extractor
    if chosen == "anthropic":
        from jobs.extract.claude import AnthropicExtractor

        return AnthropicExtractor(settings)
    if chosen == "offline":
        from jobs.extract.offline import OfflineExtractor

        return OfflineExtractor(get_embedder(settings.embedder))
    raise ConfigError(f"unknown extractor {chosen!r}; use anthropic or offline")


class StageClock:
    """Wall seconds per stage of the summarize loop, summed over episodes and threads.

    bench/summarize_throughput.py prints them per episode, so overhead is found by measurement."""

    def __init__(self) -> None:
        self.seconds: Counter = Counter()
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


@dataclass
class RunReport:
    counts: Counter = field(default_factory=Counter)
    stage_seconds: Counter = field(default_factory=Counter)
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)

    @property
    def done(self) -> int:
        return self.counts["done"]

    def line(self) -> str:
        c = self.counts
        return (
            f"done {c['done']} · failed {c['failed']} (will retry) · dead {c['dead']} · skipped {c['skipped']} · "
            f"tokens {self.input_tokens:,} in / {self.output_tokens:,} out ({self.cache_read_tokens:,} cached) · "
            f"est. cost ${self.cost_usd:.4f} · {self.seconds:.1f}s"
        )


def _transcript(row: dict, *, redact: bool) -> Transcript:
    """A claimed row as the extractors see it. Its messages are redacted (jobs.redact, unless
    EPISODES_REDACT=false, Settings.redact), so PII reaches neither the model nor the episode, its events, evidence
    quotes, entities or embedding. The stored transcript is left as the host sent it."""
    messages, counts = redact_messages([Message.model_validate(m) for m in row["messages"]], enabled=redact)
    if counts:
        log.debug("redacted", extra={"action": "redact", "transcript_id": row["id"],
                                     **{f"redacted_{k.lower()}": n for k, n in counts.items()}})
    return Transcript(
        id=row["id"], tenant_id=row["tenant_id"], user_id=row["user_id"], session_id=row["session_id"],
        purpose=row["purpose"], started_at=row["started_at"], ended_at=row["ended_at"],
        messages=messages, content_hash=row["content_hash"],
        agent_id=row["agent_id"], attempts=row["attempts"],
    )


class Summarizer:
    """Processes eligible transcripts; safe to run in many threads, processes and machines at once."""

    def __init__(
        self, db: Database, extractor: Extractor, *, embedder: Embedder | None = None,
        worker: str | None = None, job_run_id: int | None = None,
    ) -> None:
        self.db = db
        self.settings: Settings = db.settings
        self.extractor = extractor
        self.embedder = embedder or get_embedder(self.settings.embedder)
        self.worker = worker or worker_id()
        self.job_run_id = job_run_id
        self.stop = threading.Event()
        self.closed = threading.Event()
        self.clock = StageClock()
        self.leases = _LeaseKeeper(self)

    def close(self) -> None:
        """Stop the lease keeper's thread (the summarizer is not used after this)."""
        self.closed.set()

    def claim(self, tenant: str | None = None, since: dt.datetime | None = None) -> Transcript | None:
        with self.db.admin(pipeline=True) as conn:
            # A claim lost in a server crash only returns the transcript to the queue (the write
            # checks the lease), so it need not wait for its WAL flush; the episode's write does.
            conn.execute("SET LOCAL synchronous_commit = off")
            row = conn.execute(query("claim_transcript"), {
                "worker": self.worker, "lease_seconds": self.settings.lease_seconds,
                "tenant": tenant, "since": since,
            }).fetchone()
        if row is None:
            return None
        log.debug("claimed", extra={"action": "claim_transcript", "transcript_id": row["id"],
                                    "tenant": row["tenant_id"], "attempt": row["attempts"]})
        return _transcript(row, redact=self.settings.redact)

    def process(self, transcript: Transcript) -> str:
        """Summarise one claimed transcript; return done | skipped | failed | dead | lost."""
        started = time.perf_counter()
        if transcript.attempts > self.settings.max_attempts:
            # Claimed again and again without finishing: workers died on it. Dead-letter, don't loop.
            return self._fail(transcript, "abandoned by workers too many times (crashed or timed out)",
                              permanent=True)
        with self.clock("prepare"):
            open_items = self._prepare(transcript)
        if open_items is None:
            return "skipped"
        result: ExtractionResult | None = None
        crash_point(self.settings, "after_claim")
        try:
            with self.leases.held(transcript), self.clock("extract"):
                result = self.extractor.extract(transcript, open_items)
            crash_point(self.settings, "after_model_call")
            with self.clock("ground"):
                grounded = ground(result.extraction, transcript.messages, {i.event_id for i in open_items})
            with self.clock("embed"):
                vector = self.embedder.embed([search_text(grounded.episode)])[0]
        except ConfigError as exc:
            self._release(transcript, calls=_calls_of(exc, result))
            raise
        except PermanentExtractionError as exc:
            return self._fail(transcript, str(exc), permanent=True, calls=_calls_of(exc, result))
        except (TransientModelError, EpisodesError) as exc:
            return self._fail(transcript, str(exc), calls=_calls_of(exc, result))
        except Exception as exc:  # noqa: BLE001 - one bad transcript never stops the batch
            log.exception("unexpected failure", extra={"action": "summarize_error", "transcript_id": transcript.id})
            return self._fail(transcript, f"{type(exc).__name__}: {exc}")
        row = EpisodeRow(
            tenant_id=transcript.tenant_id, user_id=transcript.user_id, kind="session",
            episode=grounded.episode, started_at=transcript.started_at or transcript.ended_at,
            ended_at=transcript.ended_at, model=result.model, prompt_version=result.prompt_version,
            embedding=vector, purpose=transcript.purpose, transcript_id=transcript.id,
            session_id=transcript.session_id, content_hash=transcript.content_hash, calls=result.calls,
            dropped_events=grounded.dropped_events, dropped_entities=grounded.dropped_entities,
        )
        with self.clock("write"), self.db.tenant(transcript.tenant_id, pipeline=True) as conn:
            episode_id = write_session_episode(conn, transcript, row, worker=self.worker, job_run_id=self.job_run_id)
            crash_point(self.settings, "during_commit")
            if episode_id is None:
                raise psycopg.Rollback()  # nothing of this attempt may persist
        if episode_id is None:
            log.warning("lost the claim before writing; discarded", extra={"action": "claim_lost",
                                                                          "transcript_id": transcript.id})
            return "lost"
        log.debug("episode stored", extra={
            "action": "episode_stored", "tenant": transcript.tenant_id, "session": transcript.session_id,
            "episode_id": episode_id, "events": len(grounded.episode.key_events),
            "dropped_events": grounded.dropped_events, "ms": int((time.perf_counter() - started) * 1000),
        })
        return "done"

    def _prepare(self, transcript: Transcript) -> list[OpenItem] | None:
        """What extraction needs, read in one round trip: the user's still-open questions and
        commitments from earlier sessions (bounded). None when this content was already summarised
        with this prompt version: then the claim is completed here, with no model call."""
        with self.db.tenant(transcript.tenant_id, pipeline=True) as conn:
            current = conn.execute(
                "SELECT 1 FROM episodes WHERE tenant_id = %s AND session_id = %s AND kind = 'session' "
                "AND status = 'current' AND content_hash = %s AND prompt_version = %s",
                (transcript.tenant_id, transcript.session_id, transcript.content_hash, self.extractor.prompt_version),
            )
            items = conn.execute(query("open_items"), {
                "tenant_id": transcript.tenant_id, "user_id": transcript.user_id,
                "session_id": transcript.session_id, "before": transcript.ended_at, "limit": MAX_OPEN_ITEMS,
            })
            if current.fetchone() is not None:
                conn.execute(query("complete_transcript"), {"id": transcript.id, "worker": self.worker,
                                                            "content_hash": transcript.content_hash})
                return None
            rows = items.fetchall()
        return [OpenItem(r["event_id"], r["type"], r["what"], r["since"]) for r in rows]

    def _fail(self, transcript: Transcript, error: str, *, permanent: bool = False, calls: list | None = None) -> str:
        with self.db.admin() as conn:
            attempts = conn.execute("SELECT attempts FROM transcripts WHERE id = %s", (transcript.id,)).fetchone()
            n = attempts["attempts"] if attempts else 1
            backoff = min(RETRY_BASE_SECONDS * 2 ** max(n - 1, 0), RETRY_MAX_SECONDS)
            row = conn.execute(query("fail_transcript"), {
                "id": transcript.id, "worker": self.worker, "permanent": permanent,
                "max_attempts": self.settings.max_attempts, "backoff_seconds": backoff, "error": error[:2000],
            }).fetchone()
            record_calls(conn, calls or [], tenant_id=transcript.tenant_id, user_id=transcript.user_id,
                         transcript_id=transcript.id, job_run_id=self.job_run_id)
        outcome = "lost" if row is None else ("dead" if row["status"] == "dead" else "failed")
        log.warning("summarize failed: %s", error, extra={
            "action": "summarize_dead" if outcome == "dead" else "summarize_retry",
            "tenant": transcript.tenant_id, "session": transcript.session_id,
        })
        return outcome

    def _release(self, transcript: Transcript, calls: list | None = None) -> None:
        """Give the claim back untouched (a setting is wrong); model calls already made are kept."""
        with self.db.admin() as conn:
            conn.execute(query("release_transcript"), {"id": transcript.id, "worker": self.worker})
            record_calls(conn, calls or [], tenant_id=transcript.tenant_id, user_id=transcript.user_id,
                         transcript_id=transcript.id, job_run_id=self.job_run_id)


def _calls_of(exc: BaseException, result: ExtractionResult | None) -> list:
    """Model calls made before a failure, so failed calls are recorded and counted too."""
    return list(getattr(exc, "calls", None) or (result.calls if result else []))


class _LeaseKeeper:
    """Extends the leases of every transcript this summarizer is extracting, so a live worker is
    never 'rescued'. One thread for all worker threads, started on first use, one UPDATE per tick;
    a transcript is held only while its model call runs."""

    def __init__(self, summarizer: Summarizer) -> None:
        self.summarizer = summarizer
        self._held: Counter = Counter()  # transcript id -> threads extracting it
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @contextmanager
    def held(self, transcript: Transcript) -> Iterator[None]:
        with self._lock:
            self._held[transcript.id] += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True, name="lease-keeper")
                self._thread.start()
        try:
            yield
        finally:
            with self._lock:
                self._held[transcript.id] -= 1
                if self._held[transcript.id] <= 0:
                    del self._held[transcript.id]

    def _run(self) -> None:
        settings = self.summarizer.settings
        interval = max(settings.lease_seconds / 3, 1)
        while not self.summarizer.closed.wait(interval):
            with self._lock:
                ids = list(self._held)
            if not ids:
                continue
            try:
                with self.summarizer.db.admin() as conn:
                    conn.execute(query("extend_leases"), {"ids": ids, "worker": self.summarizer.worker,
                                                          "lease_seconds": settings.lease_seconds})
            except Exception:  # noqa: BLE001 - a missed heartbeat only risks a rescue, never a duplicate
                log.warning("heartbeat failed", extra={"action": "heartbeat_error", "transcripts": len(ids)})


def run_summarize(
    db: Database,
    *,
    extractor: Extractor,
    limit: int | None = None,
    tenant: str | None = None,
    since: dt.datetime | None = None,
    concurrency: int = 1,
    progress: Callable[[int], None] | None = None,
    embedder: Embedder | None = None,
    job: str = "summarize",
) -> RunReport:
    """Process eligible transcripts until none is left (or ``limit`` were claimed)."""
    report = RunReport()
    started = time.perf_counter()
    worker = worker_id()
    with db.admin() as conn:
        run_id = conn.execute(query("start_job_run"), {"job": job, "worker": worker}).fetchone()["id"]
    embedder = embedder or get_embedder(db.settings.embedder)
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
        report.stage_seconds = summarizer.clock.seconds
        with db.admin() as conn:
            totals = conn.execute(
                "SELECT coalesce(sum(input_tokens), 0) AS i, coalesce(sum(output_tokens), 0) AS o, "
                "coalesce(sum(cache_read_tokens), 0) AS c, coalesce(sum(cost_usd), 0) AS usd "
                "FROM model_calls WHERE job_run_id = %s", (run_id,),
            ).fetchone()
            report.input_tokens, report.output_tokens = int(totals["i"]), int(totals["o"])
            report.cache_read_tokens, report.cost_usd = int(totals["c"]), float(totals["usd"])
            conn.execute(query("finish_job_run"), {
                "id": run_id, "status": "failed" if fatal else "ok",
                "counts": Jsonb(dict(report.counts)), "error": str(fatal[0]) if fatal else None,
            })
    if fatal:
        raise fatal[0]
    return report


def count_eligible(db: Database, tenant: str | None = None, since: dt.datetime | None = None) -> int:
    with db.admin() as conn:
        return conn.execute(query("count_eligible"), {"tenant": tenant, "since": since}).fetchone()["n"]


def retry_dead(db: Database, tenant: str | None = None) -> int:
    with db.admin() as conn:
        return len(conn.execute(query("retry_dead"), {"tenant": tenant}).fetchall())
