"""Sessions of the user not yet summarised: one short line each, so a user who comes straight back
is not forgotten while summarize has not caught up (or the session is still open).

A line is built from the session's last user messages (``recall_unsummarised`` in ``sql/recall.sql``
hands over at most three), redacted with :func:`jobs.pii.redaction.redact_messages` (unless
``EPISODES_REDACT=false``, as for everything else), whitespace collapsed, newest kept first: the
messages that fit ``limit`` characters together are shown oldest first, and a newest message longer
than the limit on its own is cut, ending with "...". Once the session is summarised its transcript
is ``done`` and its episode takes the line's place.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jobs.formats.shapes import ShapeError, normalise_messages
from jobs.recall.result import RecalledSession, line_macros, skeleton_chars

SEPARATOR = " / "
HEADER = "Not yet summarised (newest first):\n"  # as prompts/previous_episodes.j2 prints it


def unsummarised_sessions(rows: Sequence[dict[str, Any]], *, chars: int, redact: bool) -> list[RecalledSession]:
    """One line each for the user's latest sessions that are open or waiting for summarize, newest first,
    from the rows of ``recall_unsummarised`` (the recaller sends it with its other reads)."""
    sessions = []
    for row in rows:
        text = last_words(row["messages"], chars, redact)
        if text:
            sessions.append(
                RecalledSession(
                    session_id=row["session_id"],
                    purpose=row["purpose"],
                    status=row["status"],
                    started_at=row["started_at"],
                    ended_at=row["ended_at"],
                    text=text,
                )
            )
    return sessions


def _said(message: object) -> str:
    """What a stored user message says in words. Rows ingested are canonical already; a row INSERTed by
    hand may hold Anthropic or OpenAI content blocks until claim time normalises it, so it goes through
    the same normaliser (jobs.formats.shapes): its text, without tool results or images. A message no
    shape fits says nothing here (summarize dead-letters it)."""
    try:
        said = normalise_messages([message])
    except ShapeError:
        return ""
    return " ".join(str(m["content"]) for m in said if m["role"] == "user")


def last_words(raw: Sequence[dict[str, Any]], limit: int, redact: bool) -> str:
    """The last user messages, redacted, within ``limit`` characters (see the module docstring)."""
    # Imported here, when there is a session to show: the detectors' patterns are a share of a cold
    # process's start (the Claude Code SessionStart hook's). The stored messages were validated on the
    # way in, so their text is redacted as it is, without building a pydantic model per message.
    from jobs.pii.redaction import redact as redact_text

    texts = [" ".join(redact_text(_said(m), enabled=redact).text.split()) for m in raw]
    kept: list[str] = []
    for text in reversed([t for t in texts if t]):
        if len(SEPARATOR.join([text, *kept])) > limit:
            break
        kept.insert(0, text)
    if not kept and texts and texts[-1]:
        newest = texts[-1]
        kept = [newest[: limit - 3].rsplit(" ", 1)[0].rstrip(" ,;:") + "..."]
    return SEPARATOR.join(kept)


def fit_sessions(
    sessions: Sequence[RecalledSession], share: float, budget_tokens: int
) -> tuple[list[RecalledSession], int]:
    """The sessions whose lines fit ``share`` of the budget (newest first), and the tokens they take.

    The tokens are taken off the budget the episodes and open items are fitted to, so the whole block
    still fits: the section is printed in addition to whatever they make of the rest.
    """
    budget = 4 * budget_tokens
    macros = line_macros()
    kept: list[RecalledSession] = []
    used = len(HEADER)
    for session in sessions:
        cost = len(macros.session_line(session)) + 1
        if skeleton_chars() + used + cost > budget or used + cost > share * budget:
            break
        kept.append(session)
        used += cost
    return kept, (used + 3) // 4 if kept else 0
