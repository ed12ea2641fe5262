"""Backfills through the Message Batches API (half the price of live calls).

``episodes run --batch`` claims eligible transcripts with a long lease owned by the batch
(``lease_owner = 'batch:<id>'``), records the batch and its items *before* submitting, submits
(splitting at the API's limits: 100,000 requests or 256 MB per batch), then polls. When a batch
has ended its results are validated and then finished by the same path as live results
(:class:`jobs.summarize.finish.Finisher`: the user's open items and current decisions are offered in
the request and may be resolved or replaced by the answer, grounding, embedding, the write), with
model-call rows marked ``batch`` and costed at half price. The table survives restarts: the
next ``run --batch`` resumes polling whatever is still open. Transcripts too long for one request,
invalid answers and errored requests go back to the queue for a live run.

Known limit: if the process dies between the API accepting a batch and recording its id, that
batch's results are never collected; its transcripts return to the queue when the lease expires
(25 h) and are processed again (paid twice). The window is one HTTP round trip.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, cast

from anthropic.types.messages.batch_create_params import Request
from psycopg.types.json import Jsonb

from jobs.db import Database, notify_eligible
from jobs.embeddings import Embedder, embedder_for
from jobs.errors import ConfigError, ModelError
from jobs.extract.claude import AnthropicExtractor, BatchRequest
from jobs.llm import ToolCaller
from jobs.models import EpisodeExtraction, ExtractionResult, Transcript
from jobs.runs import worker_id
from jobs.sql import query
from jobs.summarize.claim import Claimer, UnreadableTranscript, to_transcript
from jobs.summarize.finish import Finisher

log = logging.getLogger(__name__)

MAX_REQUESTS = 100_000
MAX_BYTES = 256 * 1024 * 1024 - 1024 * 1024  # keep a megabyte of headroom for the envelope
BATCH_LEASE_SECONDS = 25 * 3600  # batches expire after 24 h


@dataclass(frozen=True)
class _Item:
    """One transcript in a batch being assembled: its request entry and the open items it offers."""

    transcript: Transcript
    request: BatchRequest
    entry: dict[str, Any]


@dataclass
class BatchReport:
    submitted: list[str] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)

    def line(self) -> str:
        c = self.counts
        return (
            f"batches submitted {len(self.submitted)} · ingested {c['batches_ingested']} · "
            f"episodes {c['done']} · failed {c['failed']} (back to the queue) · "
            f"too long for one request {c['too_long']} (left for a live run)"
            + (f" · dead {c['dead']} (messages unreadable)" if c["dead"] else "")
        )


class BatchRunner:
    def __init__(self, db: Database, extractor: AnthropicExtractor, embedder: Embedder | None = None) -> None:
        self.db = db
        self.settings = db.settings
        self.extractor = extractor
        if not isinstance(extractor.caller, ToolCaller):  # the openai back end shares the class, not the API
            raise ConfigError("Message Batches (--batch) are the anthropic back end's; run without --batch.")
        self.client = extractor.caller.client
        self.finisher = Finisher(db, embedder or embedder_for(self.settings))
        self.worker = worker_id()

    # --- submit -----------------------------------------------------------------------------

    def submit(
        self,
        *,
        limit: int | None = None,
        tenant: str | None = None,
        since: dt.datetime | None = None,
        report: BatchReport | None = None,
    ) -> BatchReport:
        report = report or BatchReport()
        while limit is None or len(report.submitted) * MAX_REQUESTS < limit:
            batch_id = uuid.uuid4().hex[:16]
            owner = f"batch:{batch_id}"
            items: list[_Item] = []
            size = 0
            claimer = Claimer(self.db, owner=owner, lease_seconds=BATCH_LEASE_SECONDS)
            while len(items) < MAX_REQUESTS and (limit is None or report.counts["claimed"] < limit):
                try:
                    transcript = claimer.claim(tenant, since)
                except UnreadableTranscript as exc:  # a row INSERTed by hand in no shape we read
                    self.finisher.fail(exc.transcript, str(exc), owner=owner, permanent=True)
                    report.counts["dead"] += 1
                    continue
                if transcript is None:
                    break
                report.counts["claimed"] += 1
                try:
                    open_items = self.finisher.prepare(transcript, self.extractor.prompt_version, owner=owner)
                except ConfigError:  # the embedder cannot load: this claim is given back; so are the batch's
                    for item in items:
                        self._give_back(item.transcript, owner, None)
                    raise
                if open_items is None:  # this content is already summarised with this prompt: completed
                    report.counts["skipped"] += 1
                    continue
                request = self.extractor.batch_request(transcript, open_items)
                if request is None:
                    report.counts["too_long"] += 1
                    self._give_back(transcript, owner, "too long for one batch request; needs a live run")
                    continue
                entry = {"custom_id": f"t{transcript.id}", "params": request.params}
                entry_size = len(json.dumps(entry))
                if size + entry_size > MAX_BYTES and items:
                    self._give_back(transcript, owner, None)  # goes into the next batch
                    report.counts["claimed"] -= 1
                    break
                items.append(_Item(transcript, request, entry))
                size += entry_size
            if not items:
                break
            self._submit_one(batch_id, owner, items, report)
        return report

    def _submit_one(self, batch_id: str, owner: str, items: list[_Item], report: BatchReport) -> None:
        with self.db.admin() as conn:
            conn.execute(query("insert_batch"), {"id": batch_id, "requests": len(items), "worker": self.worker})
        by_tenant: dict[str, list[dict[str, Any]]] = {}
        for item in items:
            t = item.transcript
            by_tenant.setdefault(t.tenant_id, []).append(
                {
                    "batch_id": batch_id,
                    "custom_id": item.entry["custom_id"],
                    "tenant_id": t.tenant_id,
                    "transcript_id": t.id,
                    "content_hash": t.content_hash,
                    "prompt_hash": item.request.prompt_hash,
                    "offered_items": sorted(item.request.offered_items),
                    "offered_decisions": sorted(item.request.offered_decisions),
                }
            )
        for tenant_id, rows in by_tenant.items():
            with self.db.tenant(tenant_id) as conn, conn.cursor() as cur:
                cur.executemany(query("insert_batch_item"), rows)
        try:
            # Each entry's params are ToolPrompt.request(): exactly the keyword arguments of messages.create.
            requests = [cast(Request, item.entry) for item in items]
            batch = self.client.messages.batches.create(requests=requests)
        except Exception as exc:
            self._abandon(batch_id, owner, f"batch submission failed: {exc}")
            raise
        with self.db.admin() as conn:
            conn.execute(query("mark_batch_submitted"), {"id": batch_id, "remote_id": batch.id})
        report.submitted.append(batch_id)
        log.info(
            "submitted batch of %d",
            len(items),
            extra={"action": "batch_submit", "batch": batch_id, "remote_id": batch.id},
        )

    def _give_back(self, transcript: Transcript, owner: str, error: str | None) -> None:
        with self.db.admin() as conn:
            conn.execute(
                query("give_back_transcript"),
                {"tenant_id": transcript.tenant_id, "id": transcript.id, "owner": owner, "error": error},
            )
            if error is not None:  # left for a live run: wake one (without an error it goes into the next batch)
                notify_eligible(conn, transcript.tenant_id)

    def _abandon(self, batch_id: str, owner: str, error: str) -> None:
        self._release_claims(owner, error)
        with self.db.admin() as conn:
            conn.execute(
                query("finish_batch"), {"id": batch_id, "status": "failed", "counts": Jsonb({}), "error": error[:2000]}
            )

    def _release_claims(self, owner: str, error: str) -> int:
        """Return every transcript still leased to the batch to the queue, waking the workers; how many.

        Its own transaction, committed before the batch is marked finished: on a Citus cluster the release
        runs on every shard in parallel, after which the same transaction may not write the reference
        table ``model_batches``. A crash in between leaves the batch open; the next poll finishes it."""
        with self.db.admin() as conn:
            released = len(
                conn.execute(query("release_batch_claims"), {"owner": owner, "error": error[:2000]}).fetchall()
            )
            if released:
                notify_eligible(conn)
        return released

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
        counts: Counter[str] = Counter()
        with self.db.admin() as conn:
            tenants = {
                r["custom_id"]: r["tenant_id"] for r in conn.execute(query("batch_tenants"), {"batch_id": batch_id})
            }
        for result in self.client.messages.batches.results(remote_id):
            tenant = tenants.get(result.custom_id)
            counts["stale" if tenant is None else self._ingest_one(batch_id, tenant, owner, result)] += 1
        counts["failed"] += self._release_claims(owner, "no result in the batch")
        with self.db.admin() as conn:
            conn.execute(
                query("finish_batch"),
                {"id": batch_id, "status": "ingested", "counts": Jsonb(dict(counts)), "error": None},
            )
        report.counts.update(counts)
        report.counts["batches_ingested"] += 1
        log.info("ingested batch", extra={"action": "batch_ingest", "batch": batch_id, **dict(counts)})

    def _ingest_one(self, batch_id: str, tenant: str, owner: str, result: Any) -> str:
        with self.db.admin() as conn:
            row = conn.execute(
                query("batch_item"), {"tenant_id": tenant, "batch_id": batch_id, "custom_id": result.custom_id}
            ).fetchone()
        if row is None or row["lease_owner"] != owner:
            return "stale"  # transcript changed, was erased or was re-claimed meanwhile
        transcript = to_transcript(row, redact=self.settings.redact)
        end = self.finisher
        outcome = result.result.type
        if outcome != "succeeded":
            return end.fail(transcript, f"batch request {outcome}", owner=owner, backoff=False)
        message = result.result.message
        call = self.extractor.batch_call(message, row["prompt_hash"])
        parsed = self.extractor.parse(message)
        if not isinstance(parsed, EpisodeExtraction):
            call.outcome, call.error = parsed
            return end.fail(
                transcript,
                f"batch answer unusable ({parsed[0]}): {parsed[1]}",
                owner=owner,
                calls=[call],
                backoff=False,
            )
        extraction = ExtractionResult(
            parsed, model=message.model, prompt_version=self.extractor.prompt_version, calls=[call]
        )
        try:
            written = end.finish(
                transcript, extraction, row["offered_items"], owner=owner, offered_decisions=row["offered_decisions"]
            )
        except ConfigError:
            end.release(transcript, owner=owner, calls=[call])
            raise
        except ModelError as exc:  # an invented summary (jobs.summarize.finish): the next attempt asks again
            return end.fail(transcript, str(exc), owner=owner, calls=[call], backoff=False)
        except Exception as exc:
            log.exception("batch result failed", extra={"action": "batch_item_error", "transcript_id": transcript.id})
            return end.fail(transcript, f"{type(exc).__name__}: {exc}", owner=owner, calls=[call], backoff=False)
        return "done" if written == "done" else "stale"

    def run(
        self,
        *,
        limit: int | None = None,
        tenant: str | None = None,
        since: dt.datetime | None = None,
        wait: bool = True,
        poll_seconds: float = 30.0,
    ) -> BatchReport:
        """Resume open batches, submit new ones, and (with ``wait``) poll until all are ingested."""
        report, _ = self.poll()
        self.submit(limit=limit, tenant=tenant, since=since, report=report)
        while True:
            report, still_open = self.poll(report)
            if not wait or still_open == 0:
                return report
            time.sleep(poll_seconds)
