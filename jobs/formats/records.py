"""Reading transcript records: from files (our JSON and JSONL, LoCoMo conversation files, Claude Code session
files) and from objects already parsed (an HTTP request's list).

Each record comes out as ``(location, object or Rejection)``: ``file:line`` (an HTTP record: its index) and
either the parsed JSON object, not yet validated, or why it could not be read (not JSON, not an object, over
the size limit). One bad record never stops the others of its file. Validation into a transcript and the
writing are :mod:`jobs.ingest`'s.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jobs.formats.claude_code import TENANT as CLAUDE_CODE_TENANT
from jobs.formats.claude_code import default_user, is_empty, read_session_file
from jobs.formats.detect import detect
from jobs.formats.locomo import read_locomo


@dataclass(frozen=True)
class Rejection:
    location: str
    reason: str

    def __str__(self) -> str:
        return f"{self.location}: {self.reason}"


# A record as read from a file, before validation: its location and either the parsed
# object or the reason it could not be read.
Raw = tuple[str, "dict[str, Any] | Rejection"]


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
    path: Path,
    fmt: str = "auto",
    *,
    limit: int,
    idle_close_seconds: float | None,
    tenant_id: str | None = None,
    user_id: str | None = None,
) -> Iterator[Raw]:
    """The records of one file, each at most ``limit`` bytes. ``auto`` tells a Claude Code session file, a
    JSONL file and a whole JSON document (pretty-printed, an array, whatever its name) apart by their first
    lines (:func:`jobs.formats.detect.detect`). A LoCoMo file's records belong to ``tenant_id`` (default
    ``locomo``); a Claude Code session's to ``tenant_id`` and ``user_id`` (default: Claude Code's tenant and
    this machine's login name), closed after ``idle_close_seconds`` without a turn (None: Claude Code's default).
    An empty file (Claude Code leaves some) has no record and nothing wrong: skipped with a note, not rejected."""
    if is_empty(path):
        logging.getLogger(__name__).info(
            "skipped %s: the file is empty", path, extra={"action": "ingest_empty_file", "location": str(path)}
        )
        return
    kind = detect(path) if fmt == "auto" else None
    if fmt == "locomo":
        for where, item in read_locomo(path, tenant_id or "locomo"):
            yield where, Rejection(where, item) if isinstance(item, str) else item
    elif fmt == "claude-code" or kind == "claude-code":
        for where, item in read_session_file(
            path,
            tenant_id=tenant_id or CLAUDE_CODE_TENANT,
            user_id=user_id or default_user(),
            idle_close_seconds=idle_close_seconds,
        ):
            yield where, Rejection(where, item) if isinstance(item, str) else item
    elif path.suffix == ".jsonl" and kind == "lines":
        yield from _read_jsonl(path, limit)
    else:
        yield from _read_json(path, limit)


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
