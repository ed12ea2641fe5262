"""Load transcripts: validate the records that :mod:`jobs.formats.records` reads (from our JSON / JSONL
files, LoCoMo conversation files, Claude Code session files, or an HTTP request's list) and write them.

Every record is validated on its own, and files and the HTTP API's records go through one path
(:func:`ingest_records`). A bad record is reported as ``file:line: reason`` and
skipped; the good records of the same file still load. Each record is written in its own
savepoint, so nothing is half-written. Upsert is by (tenant, session): identical content is a
no-op; changed content replaces the transcript and queues it for re-summarisation. A session stays with
the user it was stored for: the same session id under another user id is rejected as a conflict.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import psycopg
from psycopg.types.json import Jsonb
from pydantic import ValidationError

from jobs.config import Settings
from jobs.db import Database, notify_eligible
from jobs.formats.detect import format_hint
from jobs.formats.records import Raw, Rejection, discover, read_records
from jobs.formats.shapes import ShapeOptions
from jobs.models import TranscriptIn
from jobs.pii.redaction import redact_messages
from jobs.sql import query

log = logging.getLogger(__name__)

_CHUNK = 250  # records per transaction


@dataclass(frozen=True)
class Outcome:
    """What happened to one record: ``accepted`` (new or changed), ``unchanged`` or ``rejected`` (with why)."""

    location: str
    result: Literal["accepted", "unchanged", "rejected"]
    reason: str | None = None


@dataclass
class IngestReport:
    inserted: int = 0
    updated: int = 0
    unchanged: int = 0
    rejected: list[Rejection] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)  # one per record; a failed chunk's records in retry order

    @property
    def loaded(self) -> int:
        return self.inserted + self.updated + self.unchanged


def validate(where: str, raw: dict[str, Any], settings: Settings, tenant_id: str | None) -> TranscriptIn | Rejection:
    """One record in any accepted message shape, validated into the canonical form (tool output
    condensed to ``Settings.tool_result_chars``), within the message limits."""
    if tenant_id is not None and "tenant_id" not in raw:
        raw = {**raw, "tenant_id": tenant_id}
    try:
        record = TranscriptIn.model_validate(
            raw, context={"shapes": ShapeOptions(tool_result_chars=settings.tool_result_chars)}
        )
    except ValidationError as exc:
        return Rejection(where, format_hint(raw) or _describe(exc))
    if len(record.messages) > settings.max_messages:
        return Rejection(where, f"{len(record.messages):,} messages, over the limit of {settings.max_messages:,}")
    chars = sum(len(m.content) for m in record.messages)
    if chars > settings.max_transcript_bytes:  # a Claude Code file is read whole; its canonical form must fit
        return Rejection(
            where,
            f"{chars:,} characters of messages after condensing tool output, over the limit "
            f"of {settings.max_transcript_bytes:,} (EPISODES_MAX_TRANSCRIPT_BYTES)",
        )
    if not any(m.content.strip() for m in record.messages):
        return Rejection(where, "no message has any content")
    return record


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:3]:
        loc = ".".join(str(p) for p in err["loc"]) or "record"
        msg = err["msg"].removeprefix("Value error, ")
        if msg.startswith((f"{loc}.", "unknown field ")):
            parts.append(msg)  # it names its own place (a message inside the list, a field of the record)
            continue
        parts.append(f"{loc}: {msg}" if err["type"] != "missing" else f"missing field {loc}")
    more = len(exc.errors()) - 3
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")


def ingest(
    db: Database,
    paths: Iterable[Path],
    *,
    fmt: str = "auto",
    tenant_id: str | None = None,
    user_id: str | None = None,
    progress: Callable[[int], object] | None = None,
) -> IngestReport:
    """Validate and upsert every record in ``paths``; return what happened to each. ``user_id``:
    the user of Claude Code sessions (default: this machine's login name)."""
    report = IngestReport()
    for path in discover(paths, (".jsonl",) if fmt == "claude-code" else (".json", ".jsonl")):
        ingest_records(
            db,
            read_records(
                path,
                fmt,
                limit=db.settings.max_transcript_bytes,
                idle_close_seconds=db.settings.idle_close_seconds,
                tenant_id=tenant_id,
                user_id=user_id,
            ),
            tenant_id=tenant_id,
            report=report,
            progress=progress,
        )
    return report


def ingest_records(
    db: Database,
    records: Iterable[Raw],
    *,
    tenant_id: str | None = None,
    only_tenant: bool = False,
    report: IngestReport | None = None,
    progress: Callable[[int], object] | None = None,
    details: bool = True,
) -> IngestReport:
    """The one write path of transcripts, for files and the HTTP API: validate, deduplicate and upsert.

    ``records`` are (location, parsed object or Rejection) pairs; a duplicate session id within
    them is rejected naming the first. ``tenant_id`` fills in records that name no tenant; with
    ``only_tenant`` (an API key's tenant) a record naming another tenant is rejected, never written.
    Every record gets one :class:`Outcome` in ``report.outcomes``, named by its location (the
    rejected ones as they are read, the written ones as their chunk commits). ``details``: a refusal by the
    database carries its DETAIL too (the day a session was erased); the HTTP API passes False, so a key that
    may ingest learns only that an erased session is refused (issue 46, item 13).
    """
    settings = db.settings
    report = report if report is not None else IngestReport()
    seen: dict[tuple[str, str], str] = {}
    pending: list[tuple[str, TranscriptIn]] = []
    for where, raw in records:
        item = raw if isinstance(raw, Rejection) else validate(where, raw, settings, tenant_id)
        if isinstance(item, TranscriptIn) and only_tenant and item.tenant_id != tenant_id:
            item = Rejection(where, f"tenant_id {item.tenant_id!r} is not the tenant of this key")
        if isinstance(item, TranscriptIn):
            key = (item.tenant_id, item.session_id)
            if key in seen:
                item = Rejection(where, f"duplicate session_id {item.session_id!r} (first at {seen[key]})")
            else:
                seen[key] = where
        if isinstance(item, Rejection):
            _reject(report, item)
            # The caller tells its user (`episodes ingest` prints each, POST /v1/transcripts returns them): a
            # warning as well printed every rejection twice.
            log.debug("rejected %s", item, extra={"action": "ingest_reject", "location": where})
            if progress:
                progress(1)
            continue
        pending.append((where, item))
        if len(pending) >= _CHUNK:
            _write(db, pending, report, progress, details)
            pending = []
    if pending:
        _write(db, pending, report, progress, details)
    return report


def _write(
    db: Database,
    batch: list[tuple[str, TranscriptIn]],
    report: IngestReport,
    progress: Callable[[int], object] | None,
    details: bool,
) -> None:
    by_tenant: dict[str, list[tuple[str, TranscriptIn]]] = {}
    for where, record in batch:
        by_tenant.setdefault(record.tenant_id, []).append((where, record))
    sql = query("upsert_transcript")
    for tenant, mixed in by_tenant.items():
        records = _not_moving(db, tenant, mixed, report)
        if not records:
            continue
        try:
            # Fast path: one pipelined round of upserts for the chunk, in one transaction.
            with db.tenant(tenant) as conn, conn.cursor() as cur:
                cur.executemany(sql, [_params(r, w, db.settings) for w, r in records], returning=True)
                outcomes = []
                while True:
                    outcomes.append(cur.fetchone())
                    if not cur.nextset():
                        break
                if any(row and row["eligible"] for row in outcomes):
                    notify_eligible(conn, tenant)
            for (where, _), row in zip(records, outcomes, strict=True):
                _count(report, where, row)
        except psycopg.Error:
            # Something in the chunk was refused: redo it record by record, each in a savepoint,
            # so only the bad records are lost and each gets its reason.
            eligible = False
            with db.tenant(tenant) as conn:
                for where, record in records:
                    try:
                        with conn.transaction():
                            row = conn.execute(sql, _params(record, where, db.settings)).fetchone()
                    except psycopg.Error as exc:
                        reason = (exc.diag.message_primary or str(exc)).strip()
                        if details and exc.diag.message_detail:  # the day of an erasure: the operator's only
                            reason += f" ({exc.diag.message_detail.strip()})"
                        _reject(report, Rejection(where, f"database refused the record: {reason}"))
                    else:
                        _count(report, where, row)
                        eligible = eligible or bool(row and row["eligible"])
                if eligible:
                    notify_eligible(conn, tenant)
        if progress:
            progress(len(records))


def _not_moving(
    db: Database, tenant: str, records: list[tuple[str, TranscriptIn]], report: IngestReport
) -> list[tuple[str, TranscriptIn]]:
    """The records that do not move a stored session to another user; the others are rejected.

    A session belongs to the user it was first stored for: a record of the same session id under another
    ``user_id`` would take it away from them (their episode then drops out of their recall), so it is
    refused (a conflict), naming neither the other user nor anything of theirs. The upsert holds the same
    rule should another write come in between (it then changes nothing)."""
    with db.tenant(tenant) as conn:
        owners = {
            row["session_id"]: row["user_id"]
            for row in conn.execute(
                query("session_owners"), {"tenant_id": tenant, "session_ids": [r.session_id for _, r in records]}
            )
        }
    kept = []
    for where, record in records:
        owner = owners.get(record.session_id)
        if owner is None or owner == record.user_id:
            kept.append((where, record))
            continue
        _reject(
            report,
            Rejection(
                where,
                f"conflict: session_id {record.session_id!r} is stored for another user of this tenant, and a "
                "session never moves to another user; send it with the user_id it was stored under, or as a new "
                "session (another session_id)",
            ),
        )
        log.debug("rejected %s", where, extra={"action": "ingest_conflict", "location": where})
    return kept


def _reject(report: IngestReport, rejection: Rejection) -> None:
    report.rejected.append(rejection)
    report.outcomes.append(Outcome(rejection.location, "rejected", rejection.reason))


def _count(report: IngestReport, where: str, row: dict[str, Any] | None) -> None:
    if row is None:
        report.unchanged += 1
    elif row["inserted"]:
        report.inserted += 1
    else:
        report.updated += 1
    report.outcomes.append(Outcome(where, "unchanged" if row is None else "accepted"))


def _params(record: TranscriptIn, where: str, settings: Settings) -> dict[str, Any]:
    """The upsert's parameters. With EPISODES_STORE_REDACTED the messages are stored redacted; the
    content hash is still that of the record as sent, so re-ingesting it stays a no-op."""
    messages, _ = redact_messages(record.messages, enabled=settings.store_redacted)
    return {
        "tenant_id": record.tenant_id,
        "user_id": record.user_id,
        "session_id": record.session_id,
        "agent_id": record.agent_id,
        "purpose": record.purpose,
        "started_at": record.started_at,
        "ended_at": record.ended_at,
        "messages": Jsonb([m.model_dump(mode="json", exclude_none=True) for m in messages]),
        "metadata": Jsonb(record.metadata) if record.metadata is not None else None,
        "content_hash": record.content_hash(),
        "source": where,
    }
