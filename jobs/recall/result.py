"""What a recall returns (Recall, RecalledEpisode, RecalledOpenItem, RecalledSession, RecalledLine) and how
it is rendered.

These dataclasses are the one typed result from the recaller to the wire: ``POST /v1/recall`` answers a
:class:`Recall` as it is and ``episodes recall --json`` prints the same JSON, both through
:func:`recall_adapter` (pydantic, imported at first use: :mod:`jobs.recall.wire` says why); the MCP tool
``recall_memory`` answers its block. The block is rendered once per result, at first use, and kept.

The block is ``prompts/previous_episodes.j2``. Fitting measures each line with the template's own
macros (:func:`line_macros`) and the block's fixed part once (:func:`skeleton_chars`), so the
arithmetic of :func:`jobs.recall.fitting.select` counts exactly what :meth:`Recall.render` prints.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property
from typing import TYPE_CHECKING, Any

from jobs.prompts import environment, render
from jobs.recall.time_cues import MONTHS
from jobs.recall.wire import Wire
from jobs.tokens import estimate_tokens

if TYPE_CHECKING:
    from pydantic import TypeAdapter

TEMPLATE = "previous_episodes.j2"


@dataclass(frozen=True)
class RecalledLine(Wire):
    """A verbatim line of an episode's session, quoted under the episode because it matches the opening
    message."""

    episode_id: int
    """The episode whose session said it; for a session compressed into a super-summary, the super's, under which
    it is quoted."""
    ordinal: int
    """Its place in the session (lines are quoted in this order); under a super-summary, its session's place among
    the super's sessions quoted here x 10^6 + its place in that session (the session's own line is episode_lines'
    row of that session)."""
    speaker: str
    """Who said it: user or assistant."""
    text: str
    """As said, relative dates followed by the date they meant ([7 May 2023])."""
    similarity: float
    """Cosine similarity to the opening message, with the same embedder."""
    said_at: dt.datetime | None = None
    """When it was said, if the transcript says."""
    score: float = 0.0
    """Its similarity, or a share of its neighbour's when that is higher (the answer follows the question)."""
    text_score: float | None = None
    """Its full-text score against the opening message (null when no word of the message occurs in it)."""
    fused: float = 0.0
    """Its dense and full-text ranks among all the user's lines, fused by reciprocal rank."""


@dataclass
class RecalledEpisode(Wire):
    """One chosen episode, with every score that put it there and why it was chosen."""

    computed = ("when", "similarity")

    id: int
    """The episode's id (GET /v1/episodes/{id})."""
    kind: str
    """session, or super: a super-summary standing in for a compressed period."""
    session_id: str | None
    """The session it summarises (null for a super-summary)."""
    purpose: str
    """The kind of conversation, e.g. sales or support."""
    summary: str
    """What the session settled, as stored."""
    topic_tags: list[str]
    """Up to five topic tags."""
    importance: float
    """0..1, set when the episode was made."""
    started_at: dt.datetime
    """When its session started."""
    ended_at: dt.datetime
    """When its session ended."""
    period_start: dt.date | None
    """First day of a super-summary's period (null for a session)."""
    period_end: dt.date | None
    """Last day of a super-summary's period (null for a session)."""
    score: float
    """The score that ranked it: vector and text ranks fused, with time decay and importance."""
    distance: float | None
    """Cosine distance of its embedding to the opening message's (null when not scored by vector)."""
    text_score: float | None
    """Full-text score against the opening message (null when it does not match)."""
    vector_rank: int | None
    """Its rank by vector similarity (1 = the closest)."""
    text_rank: int | None
    """Its rank by full-text score (1 = the best)."""
    recency_rank: int | None
    """1 = the latest; null when not among the last recent_n."""
    relevance_rank: int | None
    """1 = the best fused score; null when not in the top_k."""
    reasons: list[str] = field(default_factory=list)
    """Why it is in the block: relevant, possibly related, recent, open item."""
    compact: bool = False
    """Shown as one sentence (compact_text) instead of its whole summary."""
    compact_text: str = ""
    """The sentence shown when compact ("" otherwise)."""
    related_rank: int | None = None
    """Below the relevance floor, among the related_k best: "possibly related"."""
    lines: list[RecalledLine] = field(default_factory=list)
    """Lines of its session quoted under it, in session order."""
    replaced_on: dt.date | None = None
    """A decision or preference of it was replaced by a later session's on this day."""

    @property
    def when(self) -> str:
        """The day of its session, or a super-summary's period ("2024-01-01 to 2024-12-31")."""
        if self.kind == "super" and self.period_start and self.period_end:
            return f"{self.period_start.isoformat()} to {self.period_end.isoformat()}"
        return self.ended_at.date().isoformat()

    @property
    def day(self) -> str:
        """The day as the block writes it, in words a question uses ("8 May 2023"; a period "2024-01-01 to
        2024-12-31")."""
        if self.kind == "super" and self.period_start and self.period_end:
            return self.when
        day = self.ended_at.date()
        return f"{day.day} {MONTHS[day.month - 1]} {day.year}"

    @property
    def similarity(self) -> float | None:
        """1 - distance: cosine similarity to the opening message (null when not scored by vector)."""
        return None if self.distance is None else 1.0 - self.distance


@dataclass(frozen=True)
class RecalledOpenItem(Wire):
    """A still-open question or commitment, shown in the block's "Still open" section."""

    id: int
    """The event's id."""
    episode_id: int
    """The episode that recorded it."""
    type: str
    """open_question or commitment."""
    what: str
    """The question or what was promised."""
    who: str | None
    """Who owes it: user or agent (null when not said)."""
    due: dt.date | None
    """When it is due, if a date was said."""
    occurred_at: dt.datetime
    """When it was said."""
    stale: bool = False
    """Long overdue or old: listed only when related to the opening message."""
    times: int = 1
    """How many sessions said this same item (it is shown once)."""

    @property
    def since(self) -> str:
        return self.occurred_at.date().isoformat()


@dataclass(frozen=True)
class RecalledSession(Wire):
    """A session of the user not yet summarised (still open, or waiting for summarize), as one line."""

    computed = ("when",)

    session_id: str
    """The host's session id."""
    purpose: str
    """The kind of conversation, e.g. sales or support."""
    status: str
    """pending or running: waiting for, or being summarised."""
    started_at: dt.datetime | None
    """When it started, if known."""
    ended_at: dt.datetime | None
    """When it ended; null while it is still open."""
    text: str
    """Its last user messages, redacted and shortened."""

    @property
    def when(self) -> str:
        """The day it ended (or started, while open); "" when neither is known."""
        moment = self.ended_at or self.started_at
        return moment.date().isoformat() if moment else ""


@dataclass
class Recall(Wire):
    """The result of a recall: the ``<previous_episodes>`` block for the system prompt, the chosen episodes
    (oldest first) with their scores and reasons, the open items and the sessions not yet summarised."""

    computed = ("tokens", "earlier", "block")
    hidden = ("unsummarised", "minimum_budget")

    tenant_id: str
    """The API key's tenant."""
    user_id: str
    """The user recalled."""
    opening_message: str
    """The opening message of the new session, as asked."""
    purpose: str | None
    """The purpose asked for (null: all)."""
    purposes: list[str] | None
    """The purposes whose episodes were read (EPISODES_PURPOSE_MAP); null: all."""
    budget_tokens: int
    """The block's budget (tokens estimated as characters / 4)."""
    now: dt.datetime
    """The moment recalled as of."""
    candidates: int
    """The user's episodes that were scored."""
    episodes: list[RecalledEpisode]
    """Chosen episodes, oldest first, with reasons and scores."""
    open_items: list[RecalledOpenItem]
    """Questions and commitments still open, shown in the block."""
    nothing_relevant: bool = False
    """No episode cleared the relevance floor; the block says so."""
    sessions: list[RecalledSession] = field(default_factory=list)
    """Sessions not yet summarised, newest first."""
    unsummarised: int = 0
    """The user's sessions not yet summarised that recall read (shown or not)."""
    minimum_budget: int = 0
    """The smallest budget that shows a line (jobs.recall.fitting.minimum_budget)."""

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        self.__dict__.pop("block", None)  # a field changed (jobs.claude_code.start_view does): render anew

    @property
    def earlier(self) -> int:
        """Earlier sessions this recall knows of: candidate episodes and sessions not yet summarised."""
        return self.candidates + self.unsummarised

    @cached_property
    def block(self) -> str:
        """The ``<previous_episodes>`` block for the system prompt ("" if none fits the budget)."""
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

    def render(self) -> str:
        """The ``<previous_episodes>`` block; "" if the budget cannot hold even its shortest form.

        When nothing fits but the user has history, the block says how many earlier sessions there
        are and the budget to ask for, never that there are none. Rendered once, at first use."""
        return self.block

    @property
    def tokens(self) -> int:
        """Tokens of the block (characters / 4)."""
        return estimate_tokens(self.block)

    def to_dict(self) -> dict[str, Any]:
        """The result as JSON-ready values: exactly the body of ``POST /v1/recall``."""
        answer: dict[str, Any] = recall_adapter().dump_python(self, mode="json")
        return answer

    def to_json(self, *, indent: int | None = None) -> bytes:
        """The result as JSON, as ``POST /v1/recall`` sends it."""
        return recall_adapter().dump_json(self, indent=indent)


@cache
def recall_adapter() -> TypeAdapter[Recall]:
    """Pydantic's validator, serialiser and JSON schema of :class:`Recall`, built once per process."""
    from pydantic import TypeAdapter

    return TypeAdapter(Recall)


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
