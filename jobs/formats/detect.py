"""What kind of file `episodes ingest --format auto` was given, told from its first lines.

- ``claude-code``: a Claude Code session file (``~/.claude/projects/<project>/<session>.jsonl``): each line
  an object with a string ``type`` and Claude Code's own keys (``sessionId``, ``uuid``, ...), never
  ``messages``.
- ``lines``: one transcript per line (JSONL): a first line that is a whole JSON object by itself.
- ``document``: one JSON document, however it is laid out (a pretty-printed object, an array of
  transcripts, ``{"transcripts": [...]}``), whatever the file is named.

Only the first few lines are read, each up to :data:`LINE_BYTES`; a longer line is a line of a JSONL
file (a pretty-printed document has short lines). Imports nothing of ``jobs``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

Kind = Literal["claude-code", "lines", "document"]

LINE_BYTES = 8 * 1024 * 1024
_LINES = 5  # non-blank lines looked at
_BOM = b"\xef\xbb\xbf"
# Keys Claude Code writes on its lines (user and assistant turns, summaries, snapshots, queue operations)
_CLAUDE_CODE_KEYS = frozenset({"sessionId", "uuid", "parentUuid", "leafUuid", "messageId", "isSidechain"})
# Keys of a LoCoMo conversation file (snap-research/locomo), read with --format locomo
_LOCOMO_KEYS = frozenset({"conversation", "qa", "sample_id", "event_summary", "session_summary"})


def detect(path: Path) -> Kind:
    """The kind of ``path`` (see the module's docstring); ``document`` when nothing else fits, so the
    whole-document reader tells what is wrong, with its line and column."""
    with path.open("rb") as handle:
        seen = 0
        first = True
        while seen < _LINES:
            raw = handle.readline(LINE_BYTES)
            if not raw:
                break
            if first:
                raw, first = raw.removeprefix(_BOM), False
            if not raw.strip():
                continue
            seen += 1
            if seen == 1 and raw.lstrip().startswith(b"["):
                return "document"
            if len(raw) >= LINE_BYTES and not raw.endswith(b"\n"):
                return "lines"
            obj = _object(raw)
            if obj is not None:
                return "claude-code" if is_claude_code_line(obj) else "lines"
    return "document"


def is_claude_code_line(obj: dict[str, Any]) -> bool:
    """Is ``obj`` a line of a Claude Code session file rather than a transcript record?"""
    return isinstance(obj.get("type"), str) and "messages" not in obj and bool(_CLAUDE_CODE_KEYS & obj.keys())


def format_hint(obj: object) -> str | None:
    """The ``--format`` to use for a record that is not ours but another format's, or None."""
    if not isinstance(obj, dict):
        return None
    if is_claude_code_line(obj):
        return "this is a line of a Claude Code session file: use --format claude-code"
    if "messages" not in obj and len(_LOCOMO_KEYS & obj.keys()) >= 2:
        return "this is a LoCoMo conversation: use --format locomo"
    return None


def _object(raw: bytes) -> dict[str, Any] | None:
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None
