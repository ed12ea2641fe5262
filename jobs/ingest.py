"""Load transcripts from files: our JSON / JSONL format, LoCoMo conversation files and Claude Code
session files (:mod:`jobs.formats.claude_code`).

Every record is validated on its own, and files and the HTTP API's records go through one path
(:func:`ingest_records`). A bad record is reported as ``file:line: reason`` and
skipped; the good records of the same file still load. Each record is written in its own
savepoint, so nothing is half-written. Upsert is by (tenant, session): identical content is a
no-op; changed content replaces the transcript and queues it for re-summarisation.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import psycopg
from psycopg.types.json import Jsonb
from pydantic import ValidationError

from jobs.config import Settings
from jobs.db import Database, notify_eligible
from jobs.formats.claude_code import TENANT as CLAUDE_CODE_TENANT
from jobs.formats.claude_code import default_user, read_session_file
from jobs.formats.detect import detect, format_hint
from jobs.formats.locomo import read_locomo
from jobs.formats.shapes import ShapeOptions
from jobs.models import TranscriptIn
from jobs.pii.redaction import redact_messages
from jobs.sql import query

log = logging.getLogger(__name__)

_CHUNK = 250  # records per transaction


@dataclass(frozen=True)
class Rejection:
    location: str
    reason: str

    def __str__(self) -> str:
        return f"{self.location}: {self.reason}"


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


# A record as read from a file, before validation: its location and either the parsed
# object or the reason it could not be read.
Raw = tuple[str, "dict[str, Any] | Rejection"]


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


_BOM = b"\xef\xbb\xbf"  # a UTF-8 byte order mark, which some editors write first: not part of the data


def _read_jsonl(path: Path, limit: int) -> Iterator[Raw]:
    with path.open("rb") as handle:
        for lineno, raw in enumerate(handle, start=1):
            where = f"{path}:{lineno}"
            if lineno == 1:
                raw = raw.removeprefix(_BOM)
            if not raw.strip():
                continue
            if len(raw) > limit:
                yield (
                    where,
                    Rejection(
                        where,
                        f"record is {len(raw):,} bytes, over the limit of {limit:,} (EPISODES_MAX_TRANSCRIPT_BYTES)",
                    ),
                )
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield where, Rejection(where, f"invalid UTF-8 at byte {exc.start}")
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as exc:
                yield where, Rejection(where, _syntax(exc))
                continue
            except RecursionError:
                yield where, Rejection(where, "JSON nested too deeply")
                continue
            yield where, obj if isinstance(obj, dict) else Rejection(where, "record is not a JSON object")


def _read_json(path: Path, limit: int) -> Iterator[Raw]:
    """A JSON file holding one transcript object, a list of them, or {"transcripts": [...]}.

    Invalid UTF-8 is decoded with surrogate escapes so that only the record holding the bad bytes
    is rejected (by validation), not the whole file.
    """
    text = path.read_bytes().removeprefix(_BOM).decode("utf-8", errors="surrogateescape")
    decoder = json.JSONDecoder()
    pos = _skip_ws(text, 0)
    if pos < len(text) and text[pos] == "{":
        try:
            obj, end = decoder.raw_decode(text, pos)
        except (json.JSONDecodeError, RecursionError):
            yield from _walk_documents(path, text, pos, limit)  # told there, with what follows
            return
        if isinstance(obj, dict) and isinstance(obj.get("transcripts"), list):
            # Re-walk the inner list to keep per-record line numbers.
            inner = text.find("[", text.find('"transcripts"', pos))
            yield from _walk_array(path, text, inner, limit)
        else:
            yield from _sized(path, text, pos, end, obj, limit)
            yield from _walk_documents(path, text, _skip_ws(text, end), limit)  # JSONL under a .json name
        return
    if pos < len(text) and text[pos] == "[":
        yield from _walk_array(path, text, pos, limit)
        return
    where = f"{path}:{_line_of(text, pos)}"
    yield where, Rejection(where, "expected a JSON object or array of transcripts")


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def _walk_array(path: Path, text: str, pos: int, limit: int) -> Iterator[Raw]:
    decoder = json.JSONDecoder()
    pos = _skip_ws(text, pos + 1)
    while pos < len(text) and text[pos] != "]":
        try:
            obj, end = decoder.raw_decode(text, pos)
        except (json.JSONDecodeError, RecursionError) as exc:
            yield _bad_json(path, text, exc, pos)
            return  # the rest of the array cannot be located reliably
        yield from _sized(path, text, pos, end, obj, limit)
        pos = _skip_ws(text, end)
        if pos < len(text) and text[pos] == ",":
            pos = _skip_ws(text, pos + 1)


def _walk_documents(path: Path, text: str, pos: int, limit: int) -> Iterator[Raw]:
    """Records one after another from ``pos`` (a .json file holding one record per line, which used to
    load its first record only and drop the rest unsaid). After a syntax error reading goes on at the
    next line that starts with ``{``, as a JSONL file's next line would be read."""
    decoder = json.JSONDecoder()
    while pos < len(text):
        try:
            obj, end = decoder.raw_decode(text, pos)
        except (json.JSONDecodeError, RecursionError) as exc:
            yield _bad_json(path, text, exc, pos)
            found = text.find("\n{", exc.pos if isinstance(exc, json.JSONDecodeError) else pos)
            if found < 0:
                return
            pos = found + 1
            continue
        yield from _sized(path, text, pos, end, obj, limit)
        pos = _skip_ws(text, end)


def _sized(path: Path, text: str, start: int, end: int, obj: object, limit: int) -> Iterator[Raw]:
    where = f"{path}:{_line_of(text, start)}"
    size = end - start
    if size > limit:
        yield (
            where,
            Rejection(
                where, f"record is {size:,} characters, over the limit of {limit:,} (EPISODES_MAX_TRANSCRIPT_BYTES)"
            ),
        )
    elif not isinstance(obj, dict):
        yield where, Rejection(where, "record is not a JSON object")
    else:
        yield where, obj


def _syntax(exc: json.JSONDecodeError) -> str:
    """A syntax error as told to the one who wrote the file: the column in its line (the line is the location)."""
    return f"not valid JSON at column {exc.colno}: {exc.msg.removesuffix(' at')}"


def _bad_json(path: Path, text: str, exc: Exception, pos: int = 0) -> Raw:
    if isinstance(exc, json.JSONDecodeError):
        where = f"{path}:{exc.lineno}"
        return where, Rejection(where, _syntax(exc))
    where = f"{path}:{_line_of(text, pos)}"
    return where, Rejection(where, "JSON nested too deeply")


# ------------------------------------------------------------------------------------------------


def discover(paths: Iterable[Path], suffixes: tuple[str, ...] = (".json", ".jsonl")) -> list[Path]:
    """Expand directories into their files with ``suffixes`` (sorted, recursively), keep files as given."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found.extend(sorted(p for p in path.rglob("*") if p.suffix in suffixes and p.is_file()))
        elif path.exists():
            found.append(path)
        else:
            raise FileNotFoundError(path)
    return found


def read_records(
    path: Path, settings: Settings, fmt: str = "auto", tenant_id: str | None = None, user_id: str | None = None
) -> Iterator[Raw]:
    """The records of one file. ``auto`` tells a Claude Code session file, a JSONL file and a whole JSON
    document (pretty-printed, an array, whatever its name) apart by their first lines
    (:func:`jobs.formats.detect.detect`)."""
    kind = detect(path) if fmt == "auto" else None
    if fmt == "locomo":
        for where, item in read_locomo(path, tenant_id or "locomo"):
            yield where, Rejection(where, item) if isinstance(item, str) else item
    elif fmt == "claude-code" or kind == "claude-code":
        for where, item in read_session_file(
            path,
            tenant_id=tenant_id or CLAUDE_CODE_TENANT,
            user_id=user_id or default_user(),
            idle_close_seconds=settings.idle_close_seconds,
        ):
            yield where, Rejection(where, item) if isinstance(item, str) else item
    elif path.suffix == ".jsonl" and kind == "lines":
        yield from _read_jsonl(path, settings.max_transcript_bytes)
    else:
        yield from _read_json(path, settings.max_transcript_bytes)


def from_objects(objects: Iterable[object], limit: int) -> Iterator[Raw]:
    """Records already parsed (an HTTP request's list), located by their index, with the file limits."""
    for index, obj in enumerate(objects):
        where = str(index)
        size = len(json.dumps(obj, ensure_ascii=False).encode("utf-8", errors="surrogatepass"))
        if size > limit:
            yield (
                where,
                Rejection(
                    where, f"record is {size:,} bytes, over the limit of {limit:,} (EPISODES_MAX_TRANSCRIPT_BYTES)"
                ),
            )
        else:
            yield where, obj if isinstance(obj, dict) else Rejection(where, "record is not a JSON object")


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
            read_records(path, db.settings, fmt, tenant_id, user_id),
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
) -> IngestReport:
    """The one write path of transcripts, for files and the HTTP API: validate, deduplicate and upsert.

    ``records`` are (location, parsed object or Rejection) pairs; a duplicate session id within
    them is rejected naming the first. ``tenant_id`` fills in records that name no tenant; with
    ``only_tenant`` (an API key's tenant) a record naming another tenant is rejected, never written.
    Every record gets one :class:`Outcome` in ``report.outcomes``, named by its location (the
    rejected ones as they are read, the written ones as their chunk commits).
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
            _write(db, pending, report, progress)
            pending = []
    if pending:
        _write(db, pending, report, progress)
    return report


def _write(
    db: Database, batch: list[tuple[str, TranscriptIn]], report: IngestReport, progress: Callable[[int], object] | None
) -> None:
    by_tenant: dict[str, list[tuple[str, TranscriptIn]]] = {}
    for where, record in batch:
        by_tenant.setdefault(record.tenant_id, []).append((where, record))
    sql = query("upsert_transcript")
    for tenant, records in by_tenant.items():
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
                        _reject(report, Rejection(where, f"database refused the record: {reason}"))
                    else:
                        _count(report, where, row)
                        eligible = eligible or bool(row and row["eligible"])
                if eligible:
                    notify_eligible(conn, tenant)
        if progress:
            progress(len(records))


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
