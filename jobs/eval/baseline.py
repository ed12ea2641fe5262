"""The naive raw-message baseline that the recall block is measured against (DESIGN.md, issue 36).

What a user would write first in an afternoon: embed every raw message of the user's transcripts
with the same embedder recall uses, and for each opening message fill the same token budget with
the messages closest to it (cosine similarity; vectors are L2-normalised, so a dot product).

- Messages: the canonical messages stored in ``transcripts.messages`` (what ingest wrote, redaction
  included), roles ``user`` and ``assistant`` only; tool traffic (role ``tool``) and ``system``
  messages are left out, as are messages with no text.
- Rendering: one message a line, ``- <speaker>: <text>``, most similar first, where the speaker is
  the message's ``name`` when it has one (LoCoMo's speakers) and its role otherwise. Newlines inside
  a message become spaces. The *undated* baseline shows no dates (as issue 36 measured it).
- The *dated* baseline (issue 47) is the same with every message led by its session's date, the
  date the transcript started, written as the block writes a date it resolves (``[7 May 2023]``,
  :mod:`jobs.recall.relative_dates`): ``- [8 May 2023] Caroline: <text>``. The same messages,
  vectors and ranking; the dates take room in the same budget. Written ISO (``[2023-05-08]``) the
  dates would hold no word of an answer like "8 May 2023" (answer coverage compares words): on the
  five LoCoMo conversations the ISO form covered 0.376 at 1,500 tokens, no more than no dates
  (0.377), and this form 0.464. A recall block is measured against the better of the two.
- Budget: :func:`jobs.tokens.estimate_tokens` (characters / 4) over the whole rendered text. Messages
  are taken in order of similarity; one that would overflow the budget is skipped and the next ones
  are still tried, so a long message never leaves the budget half empty.
- Vectors are computed once per distinct message text for a run (:class:`MessageIndex` caches them
  across users, so users sharing messages, such as sde-bench's decoy chats, embed them once).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from jobs.db import Database
from jobs.embeddings import Embedder
from jobs.eval.queries import eval_query

ROLES = frozenset({"user", "assistant"})


@dataclass(frozen=True)
class RawMessage:
    speaker: str
    text: str
    day: str = ""  # the session's date, "8 May 2023" (empty when unknown)

    @property
    def line(self) -> str:
        return f"- {self.speaker}: {' '.join(self.text.split())}"

    @property
    def dated_line(self) -> str:
        """The line led by the session's date (the dated baseline); the plain line when no date is known."""
        return f"- [{self.day}] {self.speaker}: {' '.join(self.text.split())}" if self.day else self.line


def raw_messages(messages: Sequence[Any], day: str = "") -> list[RawMessage]:
    """The spoken messages (roles user and assistant, with text) of canonical messages, in order; ``day`` is
    their session's date."""
    found: list[RawMessage] = []
    for m in messages:
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            continue
        text = m.get("content")
        if not isinstance(text, str) or not text.strip():
            continue
        found.append(RawMessage(str(m.get("name") or m["role"]), text, day))
    return found


def user_messages(db: Database, tenant_id: str, user_id: str) -> list[RawMessage]:
    """Every spoken message of the user's transcripts, oldest session first."""
    with db.tenant(tenant_id) as conn:
        rows = conn.execute(eval_query("eval_user_messages"), {"tenant_id": tenant_id, "user_id": user_id}).fetchall()
    return [m for row in rows for m in raw_messages(row["messages"], _day(row["started_at"]))]


def _day(started_at: dt.datetime | None) -> str:
    """``8 May 2023`` (the session's date, UTC, as the block writes a resolved date); empty when unknown."""
    if started_at is None:
        return ""
    day = started_at.astimezone(dt.UTC).date() if started_at.tzinfo else started_at.date()
    return f"{day.day} {day:%B} {day.year}"


def fill_budget(
    messages: Sequence[RawMessage], vectors: np.ndarray, query: np.ndarray, budget_tokens: int, *, dated: bool = False
) -> str:
    """The closest messages to ``query``, one a line, as many as the budget holds (module docstring);
    ``dated`` leads each with its session's date."""
    if not messages:
        return ""
    order = np.argsort(-(vectors @ query), kind="stable")
    used = -1  # characters of the text so far; the first line adds no newline before it
    lines: list[str] = []
    limit = budget_tokens * 4  # jobs.tokens.estimate_tokens(text) <= budget  <=>  len(text) <= 4 * budget
    for i in order:
        line = messages[int(i)].dated_line if dated else messages[int(i)].line
        if used + 1 + len(line) > limit:
            continue
        lines.append(line)
        used += 1 + len(line)
        if limit - used < 8:  # no line of a speaker and a word fits any more
            break
    return "\n".join(lines)


@dataclass
class MessageIndex:
    """The raw messages of each user and their vectors, computed once per run (see the module docstring)."""

    db: Database
    embedder: Embedder
    _users: dict[tuple[str, str], tuple[list[RawMessage], np.ndarray]] = field(default_factory=dict)
    _vectors: dict[str, np.ndarray] = field(default_factory=dict)

    def messages(self, tenant_id: str, user_id: str) -> tuple[list[RawMessage], np.ndarray]:
        key = (tenant_id, user_id)
        if key not in self._users:
            messages = user_messages(self.db, tenant_id, user_id)
            missing = sorted({m.text for m in messages} - self._vectors.keys())
            for text, vector in zip(missing, self.embedder.embed(missing) if missing else []):
                self._vectors[text] = np.asarray(vector, dtype=np.float32)
            vectors = (
                np.stack([self._vectors[m.text] for m in messages])
                if messages
                else np.zeros((0, self.embedder.dim), dtype=np.float32)
            )
            self._users[key] = (messages, vectors)
        return self._users[key]

    def block(self, tenant_id: str, user_id: str, query: np.ndarray, budget_tokens: int, *, dated: bool = False) -> str:
        """The baseline's text for one opening message (its vector ``query``) of this user, undated or dated."""
        messages, vectors = self.messages(tenant_id, user_id)
        return fill_budget(messages, vectors, np.asarray(query, dtype=np.float32), budget_tokens, dated=dated)

    def blocks(self, tenant_id: str, user_id: str, query: np.ndarray, budget_tokens: int) -> tuple[str, str]:
        """The undated and the dated baseline's text for one opening message."""
        return (
            self.block(tenant_id, user_id, query, budget_tokens),
            self.block(tenant_id, user_id, query, budget_tokens, dated=True),
        )
