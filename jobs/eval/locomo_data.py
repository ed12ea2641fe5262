"""A LoCoMo conversation as `episodes eval locomo` reads it: its sessions and its questions
(:func:`jobs.eval.locomo.load_conversation` builds them; the tallies and the compression step read them)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Session:
    number: int
    when: dt.datetime
    summary: str
    events: list[tuple[str, str]]  # (speaker, event)


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    sessions: frozenset[int]
    answer_words: frozenset[str] = frozenset()  # the reference answer's content words (jobs.eval.answers)


@dataclass
class Conversation:
    path: Path
    sessions: dict[int, Session]
    questions: list[Question]
    malformed_evidence: int = 0
    unusable_questions: int = 0

    @property
    def user_id(self) -> str:
        return f"locomo-{self.path.stem}"

    @property
    def now(self) -> dt.datetime:
        return max(s.when for s in self.sessions.values()) + dt.timedelta(minutes=1)
