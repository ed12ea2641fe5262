"""What a recall returns (Recall, RecalledEpisode, RecalledOpenItem) and how it is rendered.

The block is ``prompts/previous_episodes.j2``. Fitting measures each line with the template's own
macros (:func:`line_macros`) and the block's fixed part once (:func:`skeleton_chars`), so the
arithmetic of :func:`jobs.recall.fitting.select` counts exactly what :meth:`Recall.render` prints.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from functools import cache
from typing import Any

from jobs.prompts import environment, render
from jobs.tokens import estimate_tokens

TEMPLATE = "previous_episodes.j2"


@dataclass(frozen=True)
class RecalledLine:
    """A verbatim line of an episode's session (table episode_lines), quoted under the episode because it
    matches the opening message (``similarity``: cosine, with the same embedder)."""

    episode_id: int
    ordinal: int
    speaker: str
    text: str  # as said, relative dates followed by the date they meant ([7 May 2023]; jobs.recall.relative_dates)
    similarity: float
    said_at: dt.datetime | None = None
    score: float = 0.0  # its similarity, or a share of its neighbour's when that is higher (sql/recall.sql)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RecalledEpisode:
    """One chosen episode, with every score that put it there and why it was chosen."""

    id: int
    kind: str
    session_id: str | None
    purpose: str
    summary: str
    topic_tags: list[str]
    importance: float
    started_at: dt.datetime
    ended_at: dt.datetime
    period_start: dt.date | None
    period_end: dt.date | None
    score: float
    distance: float | None
    text_score: float | None
    vector_rank: int | None
    text_rank: int | None
    recency_rank: int | None  # 1 = the latest; None when not among the last recent_n
    relevance_rank: int | None  # 1 = the best fused score; None when not in the top_k
    reasons: list[str] = field(default_factory=list)
    compact: bool = False
    compact_text: str = ""
    related_rank: int | None = None  # below the floor, among the related_k best: "possibly related"
    lines: list[RecalledLine] = field(default_factory=list)  # quoted under the episode, in session order
    replaced_on: dt.date | None = None  # a decision or preference of it was replaced by a later session's

    @property
    def when(self) -> str:
        if self.kind == "super" and self.period_start and self.period_end:
            return f"{self.period_start.isoformat()} to {self.period_end.isoformat()}"
        return self.ended_at.date().isoformat()

    @property
    def similarity(self) -> float | None:
        return None if self.distance is None else 1.0 - self.distance

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "when": self.when, "similarity": self.similarity}


@dataclass(frozen=True)
class RecalledOpenItem:
    """A still-open question or commitment, shown in the block's "Still open" section."""

    id: int
    episode_id: int
    type: str
    what: str
    who: str | None
    due: dt.date | None
    occurred_at: dt.datetime
    stale: bool = False  # long overdue or old (migration 0009): listed only as related to the message
    times: int = 1  # sessions that said this same item (jobs.recall.open_items.same_item): shown once

    @property
    def since(self) -> str:
        return self.occurred_at.date().isoformat()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RecalledSession:
    """A session of the user not yet summarised (still open, or waiting for summarize), as one line."""

    session_id: str
    purpose: str
    status: str  # pending or running
    started_at: dt.datetime | None
    ended_at: dt.datetime | None  # None: still open
    text: str  # its last user messages, redacted and shortened (jobs.recall.unsummarised)

    @property
    def when(self) -> str:
        moment = self.ended_at or self.started_at
        return moment.date().isoformat() if moment else ""

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "when": self.when}


@dataclass
class Recall:
    """The result of a recall: chosen episodes (oldest first), open items, and the block."""

    tenant_id: str
    user_id: str
    opening_message: str
    purpose: str | None
    purposes: list[str] | None
    budget_tokens: int
    now: dt.datetime
    candidates: int
    episodes: list[RecalledEpisode]
    open_items: list[RecalledOpenItem]
    nothing_relevant: bool = False  # no episode cleared the relevance floor; the block says so
    sessions: list[RecalledSession] = field(default_factory=list)  # not yet summarised, newest first
    unsummarised: int = 0  # the user's sessions not yet summarised that recall read (shown or not)
    minimum_budget: int = 0  # the smallest budget that shows a line (jobs.recall.fitting.minimum_budget)

    @property
    def earlier(self) -> int:
        """Earlier sessions this recall knows of: candidate episodes and sessions not yet summarised."""
        return self.candidates + self.unsummarised

    def render(self) -> str:
        """The ``<previous_episodes>`` block; "" if the budget cannot hold even its shortest form.

        When nothing fits but the user has history, the block says how many earlier sessions there
        are and the budget to ask for, never that there are none."""
        block = render_block(
            self.now,
            self.episodes,
            self.open_items,
            self.nothing_relevant,
            self.sessions,
            earlier=self.earlier,
            minimum_budget=self.minimum_budget,
        )
        return block if estimate_tokens(block) <= self.budget_tokens else ""

    @property
    def tokens(self) -> int:
        return estimate_tokens(self.render())

    def to_dict(self) -> dict[str, Any]:
        return {
            "tenant_id": self.tenant_id,
            "user_id": self.user_id,
            "opening_message": self.opening_message,
            "purpose": self.purpose,
            "purposes": self.purposes,
            "budget_tokens": self.budget_tokens,
            "now": self.now.isoformat(),
            "candidates": self.candidates,
            "tokens": self.tokens,
            "nothing_relevant": self.nothing_relevant,
            "earlier": self.earlier,
            "episodes": [ep.to_dict() for ep in self.episodes],
            "open_items": [item.to_dict() for item in self.open_items],
            "sessions": [session.to_dict() for session in self.sessions],
            "block": self.render(),
        }


def render_block(
    now: dt.datetime,
    episodes: Sequence[RecalledEpisode],
    open_items: Sequence[RecalledOpenItem],
    nothing_relevant: bool = False,
    sessions: Sequence[RecalledSession] = (),
    *,
    earlier: int = 0,
    minimum_budget: int = 0,
) -> str:
    """The ``<previous_episodes>`` block as of ``now``, whatever its size. With no line to show, it says
    "No earlier sessions" only when ``earlier`` is 0; otherwise how many there are and ``minimum_budget``."""
    return render(
        TEMPLATE,
        as_of=now.date().isoformat(),
        episodes=episodes,
        open_items=open_items,
        nothing_relevant=nothing_relevant,
        sessions=sessions,
        earlier=earlier,
        minimum_budget=minimum_budget,
    )


@cache
def line_macros() -> Any:
    """The template's line macros, to measure each line exactly as the block will show it."""
    return (
        environment()
        .get_template(TEMPLATE)
        .make_module(
            {
                "as_of": "",
                "episodes": [],
                "open_items": [],
                "nothing_relevant": False,
                "sessions": [],
                "earlier": 0,
                "minimum_budget": 0,
            }
        )
    )


@cache
def nothing_relevant_chars() -> int:
    """Characters the "nothing looks related" line adds to a block that has episodes or open items."""
    when = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
    item = RecalledOpenItem(0, 0, "commitment", "x", None, None, when)
    return len(render_block(when, [], [item], True)) - len(render_block(when, [], [item]))


@cache
def skeleton_chars() -> int:
    """Characters of the block's skeleton (both sections present), measured with one dummy line each."""
    when = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
    ep = RecalledEpisode(
        0,
        "session",
        "s",
        "general",
        "x",
        [],
        0.5,
        when,
        when,
        None,
        None,
        0.0,
        None,
        None,
        None,
        None,
        1,
        None,
        ["recent"],
    )
    item = RecalledOpenItem(0, 0, "commitment", "x", None, None, when)
    macros = line_macros()
    block = render_block(when, [ep], [item])
    return len(block) - len(macros.episode_line(ep)) - len(macros.open_item_line(item)) - 2
