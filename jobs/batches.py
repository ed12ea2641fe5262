"""Backfills through the Message Batches API (half the price of live calls).

``episodes run --batch`` claims eligible transcripts with a long lease owned by the batch
(``lease_owner = 'batch:<id>'``), records the batch and its items *before* submitting, submits
(splitting at the API's limits: 100,000 requests or 256 MB per batch), then polls. When a batch
has ended its results are validated, grounded, embedded and written exactly like live results,
with model-call rows marked ``batch`` and costed at half price. The table survives restarts: the
next ``run --batch`` resumes polling whatever is still open. Transcripts too long for one request,
invalid answers and errored requests go back to the queue for a live run.

Known limit: if the process dies between the API accepting a batch and recording its id, that
batch's results are never collected; its transcripts return to the queue when the lease expires
(25 h) and are processed again (paid twice). The window is one HTTP round trip.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field

from psycopg.types.json import Jsonb

from jobs.db import Database
from jobs.embeddings import Embedder, get_embedder
from jobs.extract.claude import AnthropicExtractor
from jobs.extract.grounding import ground
from jobs.llm import parse_tool_output, usage_call
from jobs.models import EpisodeExtraction, search_text
from jobs.runs import worker_id
from jobs.sql import query
from jobs.store import EpisodeRow, record_calls, write_session_episode
from jobs.summarize import _transcript

log = logging.getLogger(__name__)

MAX_REQUESTS = 100_000
MAX_BYTES = 256 * 1024 * 1024 - 1024 * 1024  # keep a megabyte of headroom for the envelope
BATCH_LEASE_SECONDS = 25 * 3600  # batches expire after 24 h


@dataclass
class BatchReport:
    submitted: list[str] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)

    def line(self) -> str:
        c = self.counts
        return (f"batches submitted {len(self.submitted)} · ingested {c['batches_ingested']} · "
                f"episodes {c['done']} · failed {c['failed']} (back to the queue) · "
                f"too long for one request {c['too_long']} (left for a live run)")


class BatchRunner:
    def __init__(self, db: Database, extractor: AnthropicExtractor, embedder: Embedder | None = None) -> None:
        self.db = db
        self.settings = db.settings
        self.extractor = extractor
        self.client = extractor.caller.client
        self.embedder = embedder or get_embedder(self.settings.embedder)
        self.worker = worker_id()

    # --- submit -----------------------------------------------------------------------------

    def submit(self, *, limit: int | None = None, tenant: str | None = None, since: object = None,
               report: BatchReport | None = None) -> BatchReport:
        report = report or BatchReport()
        while limit is None or len(report.submitted) * MAX_REQUESTS < limit:
            batch_id = uuid.uuid4().hex[:16]
            owner = f"batch:{batch_id}"
            items, size = [], 0
            while len(items) < MAX_REQUESTS and (limit is None or report.counts["claimed"] < limit):
                with self.db.admin() as conn:
                    row = conn.execute(query("claim_transcript"), {
                        "worker": owner, "lease_seconds": BATCH_LEASE_SECONDS, "tenant": tenant, "since": since,
                    }).fetchone()
                if row is None:
                    break
                report.counts["claimed"] += 1
                transcript = _transcript(row, redact=self.settings.redact)
                prompts = self.extractor.prompts_for(transcript)
                if len(prompts) != 1:
                    report.counts["too_long"] += 1
                    self._give_back(transcript.id, owner, "too long for one batch request; needs a live run")
                    continue
                params = prompts[0].request(self.settings.model, self.settings.max_output_tokens)
                entry = {"custom_id": f"t{transcript.id}", "params": params}
                entry_size = len(json.dumps(entry))
                if size + entry_size > MAX_BYTES and items:
                    self._give_back(transcript.id, owner, None)  # goes into the next batch
                    report.counts["claimed"] -= 1
                    break
                items.append((transcript, prompts[0].prompt_hash, entry))
                size += entry_size
            if not items:
                break
            self._submit_one(batch_id, owner, items, report)
        return report

    def _submit_one(self, batch_id: str, owner: str, items: list, report: BatchReport) -> None:
        with self.db.admin() as conn:
            conn.execute(query("insert_batch"), {"id": batch_id, "requests": len(items), "worker": self.worker})
        by_tenant: dict[str, list] = {}
        for transcript, prompt_hash, entry in items:
            by_tenant.setdefault(transcript.tenant_id, []).append({
                "batch_id": batch_id, "custom_id": entry["custom_id"], "tenant_id": transcript.tenant_id,
                "transcript_id": transcript.id, "content_hash": transcript.content_hash, "prompt_hash": prompt_hash,
            })
        for tenant_id, rows in by_tenant.items():
            with self.db.tenant(tenant_id) as conn, conn.cursor() as cur:
                cur.executemany(query("insert_batch_item"), rows)
        try:
            batch = self.client.messages.batches.create(requests=[entry for _, _, entry in items])
        except Exception as exc:
            self._abandon(batch_id, owner, f"batch submission failed: {exc}")
            raise
        with self.db.admin() as conn:
            conn.execute(query("mark_batch_submitted"), {"id": batch_id, "remote_id": batch.id})
        report.submitted.append(batch_id)
        log.info("submitted batch of %d", len(items), extra={"action": "batch_submit", "batch": batch_id,
                                                              "remote_id": batch.id})

    def _give_back(self, transcript_id: int, owner: str, error: str | None) -> None:
        with self.db.admin() as conn:
            conn.execute(
                "UPDATE transcripts SET status = 'pending', lease_owner = NULL, lease_until = NULL, "
                "attempts = greatest(attempts - 1, 0), last_error = coalesce(%s, last_error) "
                "WHERE id = %s AND lease_owner = %s", (error, transcript_id, owner))

    def _abandon(self, batch_id: str, owner: str, error: str) -> None:
        with self.db.admin() as conn:
            conn.execute(query("release_batch_claims"), {"owner": owner, "error": error[:2000]})
            conn.execute(query("finish_batch"), {"id": batch_id, "status": "failed", "counts": Jsonb({}),
                                                 "error": error[:2000]})

    # --- poll and ingest --------------------------------------------------------------------

    def poll(self, report: BatchReport | None = None) -> tuple[BatchReport, int]:
        """Ingest every ended batch; return the report and how many batches are still processing."""
        report = report or BatchReport()
        with self.db.admin() as conn:
            open_batches = conn.execute(query("open_batches")).fetchall()
        still_open = 0
        for batch in open_batches:
            owner = f"batch:{batch['id']}"
            if batch["remote_id"] is None:  # died between recording and submitting: nothing was sent
                self._abandon(batch["id"], owner, "submission did not complete; returned to the queue")
                continue
            remote = self.client.messages.batches.retrieve(batch["remote_id"])
            if remote.processing_status != "ended":
                still_open += 1
                continue
            self._ingest(batch["id"], batch["remote_id"], owner, report)
        return report, still_open

    def _ingest(self, batch_id: str, remote_id: str, owner: str, report: BatchReport) -> None:
        counts: Counter = Counter()
        for result in self.client.messages.batches.results(remote_id):
            counts[self._ingest_one(batch_id, owner, result)] += 1
        with self.db.admin() as conn:  # anything the results did not mention goes back to the queue
            lost = len(conn.execute(query("release_batch_claims"), {
                "owner": owner, "error": "no result in the batch"}).fetchall())
            counts["failed"] += lost
            conn.execute(query("finish_batch"), {"id": batch_id, "status": "ingested", "counts": Jsonb(dict(counts)),
                                                 "error": None})
        report.counts.update(counts)
        report.counts["batches_ingested"] += 1
        log.info("ingested batch", extra={"action": "batch_ingest", "batch": batch_id, **dict(counts)})

    def _ingest_one(self, batch_id: str, owner: str, result: object) -> str:
        with self.db.admin() as conn:
            row = conn.execute(query("batch_item"), {"batch_id": batch_id, "custom_id": result.custom_id}).fetchone()
        if row is None or row["lease_owner"] != owner:
            return "stale"  # transcript changed, was erased or was re-claimed meanwhile
        transcript = _transcript(row, redact=self.settings.redact)
        outcome = result.result.type
        if outcome != "succeeded":
            return self._fail(transcript, owner, f"batch request {outcome}", [])
        message = result.result.message
        call = usage_call(self.settings, message, template="extract_episode_user.j2", prompt_hash=row["prompt_hash"],
                          batch=True)
        parsed = parse_tool_output(message, "record_episode", EpisodeExtraction)
        if not isinstance(parsed, EpisodeExtraction):
            call.outcome, call.error = parsed
            return self._fail(transcript, owner, f"batch answer unusable ({parsed[0]}): {parsed[1]}", [call])
        grounded = ground(parsed, transcript.messages)
        vector = self.embedder.embed([search_text(grounded.episode)])[0]
        episode = EpisodeRow(
            tenant_id=transcript.tenant_id, user_id=transcript.user_id, kind="session", episode=grounded.episode,
            started_at=transcript.started_at or transcript.ended_at, ended_at=transcript.ended_at,
            model=message.model, prompt_version=self.extractor.prompt_version, embedding=vector,
            purpose=transcript.purpose, transcript_id=transcript.id, session_id=transcript.session_id,
            content_hash=transcript.content_hash, calls=[call], dropped_events=grounded.dropped_events,
            dropped_entities=grounded.dropped_entities,
        )
        with self.db.tenant(transcript.tenant_id) as conn:
            written = write_session_episode(conn, transcript, episode, worker=owner, job_run_id=None)
        return "done" if written else "stale"

    def _fail(self, transcript: object, owner: str, error: str, calls: list) -> str:
        with self.db.admin() as conn:
            conn.execute(query("fail_transcript"), {
                "id": transcript.id, "worker": owner, "permanent": False,
                "max_attempts": self.settings.max_attempts, "backoff_seconds": 0, "error": error[:2000],
            })
            record_calls(conn, calls, tenant_id=transcript.tenant_id, user_id=transcript.user_id,
                         transcript_id=transcript.id, job_run_id=None)
        return "failed"

    def run(self, *, limit: int | None = None, tenant: str | None = None, since: object = None,
            wait: bool = True, poll_seconds: float = 30.0) -> BatchReport:
        """Resume open batches, submit new ones, and (with ``wait``) poll until all are ingested."""
        report, _ = self.poll()
        self.submit(limit=limit, tenant=tenant, since=since, report=report)
        while True:
            report, still_open = self.poll(report)
            if not wait or still_open == 0:
                return report
            time.sleep(poll_seconds)
