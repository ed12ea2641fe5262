"""The one model compressor, composed with a caller: :class:`ModelCompressor`, forced tool
``record_period_summary``, validated, hierarchical within the budget.

Which model answers is the caller's business (:class:`jobs.llm.repair.Caller`, as for the one model
extractor, :mod:`jobs.extract.model`): Claude through the anthropic SDK (:class:`jobs.llm.tools.ToolCaller`,
the default), an OpenAI Chat Completions server (:class:`jobs.llm.openai_chat.ChatCaller`) or the user's
Claude Code CLI (:class:`jobs.llm.claude_cli.ClaudeCli`); the caller validates the answer with one repair
and records one model call per request. The prompts, the packing, the reduce and the grounding below are
written once for all three; supers record the caller's label as their model.

**Bounded requests.** Episodes are packed into requests of at most ``transcript_token_budget``
estimated tokens (:func:`jobs.tokens.estimate_tokens`: 4 characters a token, so the room is
measured in characters of the rendered blocks); an oversized episode shows fewer events, which are
still carried. The partial summaries are merged in requests that hold at least two, level by level
(:func:`jobs.llm.reduce_levels`), so no request grows with the length of the period. Each block is
first shrunk to fit (:func:`_fit`: fewer events shown, then no entities, then a shorter summary).

**Grounding.** Each answer is grounded in its own request (:func:`_ground`): a key event must cite a
source event id shown in that request (once), and an entity must occur in the request text
(:func:`jobs.extract.grounding.ground_entities`, the session rule for entities). What is dropped is
counted on the super.

**Quoting.** Every stored text a block shows (summaries, tags, events, names, purposes) goes through
the templates' ``inert`` filter (:func:`jobs.prompts.inert`): one line, no markup, no look-alike of
``< > /``, so a stored episode cannot close ``<episode>`` or forge another.
"""

from __future__ import annotations

import datetime as dt
import html
import json
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from jobs.compress.compressor import Compression, SourceEpisode, SourceEvent
from jobs.compress.periods import Period
from jobs.compress.schema import PeriodSummary
from jobs.config import Settings
from jobs.extract.grounding import ground_entities
from jobs.llm import ToolCaller, ToolPrompt, pack, reduce_levels
from jobs.llm.repair import Caller
from jobs.models import Entity, ModelCall, tool_input_schema
from jobs.prompts import environment, fingerprint, render, source
from jobs.tokens import estimate_tokens

TOOL_NAME = "record_period_summary"
TOOL_DESCRIPTION = "Record one summary of a period of the user's sessions."
SYSTEM_TEMPLATE = "compress_system.j2"
SESSIONS_TEMPLATE = "compress_sessions_user.j2"
REDUCE_TEMPLATE = "compress_reduce_user.j2"
EVENT_LABELS = {"decision": "decision", "open_question": "open question", "commitment": "open commitment"}


def prompt_version() -> str:
    """Changes whenever a compress template or the output schema changes (stored on each super)."""
    schema = tool_input_schema(PeriodSummary)
    return "compress-" + fingerprint(
        source(SYSTEM_TEMPLATE), source(SESSIONS_TEMPLATE), source(REDUCE_TEMPLATE), json.dumps(schema, sort_keys=True)
    )


@dataclass
class _EventView:
    id: int
    label: str
    who: str | None
    due: dt.date | None
    what: str


@dataclass
class _Block:
    """What a template block shows: one episode (sessions level) or one partial summary (reduce)."""

    summary: str
    topic_tags: list[str]
    events: list[_EventView]
    entities: list[str]
    id: int = 0
    date: str = ""
    purpose: str = ""
    importance: float = 0.0
    first: str = ""
    last: str = ""
    sessions: int = 0
    hidden_events: int = 0


@dataclass
class _Partial:
    """A grounded summary of consecutive sessions; ``events`` are (source event id, restated sentence)."""

    summary: str
    topic_tags: list[str]
    events: list[tuple[int, str]]
    entities: list[Entity]
    importance: float
    first: dt.date
    last: dt.date
    sessions: int


@dataclass
class _Shown:
    """A partial with the block that shows it in a reduce request, and that block's rendered size."""

    partial: _Partial
    block: _Block
    size: int


@cache
def _macro(template: str, name: str) -> Callable[[_Block], str]:
    module = (
        environment()
        .get_template(template)
        .make_module(
            {
                "tool_name": TOOL_NAME,
                "part_number": 1,
                "part_count": 1,
                "period": "",
                "session_count": 0,
                "episodes": [],
                "partials": [],
            }
        )
    )
    macro: Callable[[_Block], str] = getattr(module, name)
    return macro


class ModelCompressor:
    """Compress a period with a model through ``caller`` (None: Claude, EPISODES_MODEL, through
    :class:`jobs.llm.ToolCaller`). Its supers record the caller's label as their model."""

    def __init__(self, settings: Settings, caller: Caller | None = None) -> None:
        self.settings = settings
        self.caller: Caller = caller or ToolCaller(settings)
        self.name = self.caller.label
        self.prompt_version = prompt_version()
        self._schema = tool_input_schema(PeriodSummary)
        self._system = render(SYSTEM_TEMPLATE, tool_name=TOOL_NAME)
        # Estimated tokens of the latest user messages sent, for the budget check of tests and benchmarks.
        self.request_tokens: deque[int] = deque(maxlen=1_000_000)

    def close(self) -> None:
        self.caller.close()

    def __enter__(self) -> ModelCompressor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def compress(self, period: Period, sources: Sequence[SourceEpisode]) -> Compression:
        """Summarise the sessions in parts that fit the budget, then merge the parts level by level.

        A failure raises a :class:`~jobs.errors.ModelError` that carries every call made so far
        (:mod:`jobs.llm.tools`), so the failed group's calls are recorded too.
        """
        calls: list[ModelCall] = []
        dropped: Counter[str] = Counter()
        by_id = {e.id: e for s in sources for e in s.events}
        ctx = {"tool_name": TOOL_NAME, "period": period.label, "session_count": len(sources)}

        views = [self._episode_view(s) for s in sources]
        room = self._room(SESSIONS_TEMPLATE, "episodes", ctx)
        measure = _macro(SESSIONS_TEMPLATE, "episode_block")
        chunks = pack([_fit(v, measure, room) for v in views], room)
        partials = []
        for n, chunk in enumerate(chunks, start=1):
            blocks = [views[i] for i in chunk]
            user = render(SESSIONS_TEMPLATE, part_number=n, part_count=len(chunks), episodes=blocks, **ctx)
            out = self._call(SESSIONS_TEMPLATE, user, calls)
            picked = [sources[i] for i in chunk]
            partials.append(
                _ground(out, user, blocks, dropped, picked[0].ended_at.date(), picked[-1].ended_at.date(), len(picked))
            )

        room = self._room(REDUCE_TEMPLATE, "partials", ctx)
        measure = _macro(REDUCE_TEMPLATE, "partial_block")

        def shown(p: _Partial) -> _Shown:  # at most half the room: a reduce request merges two or more
            block = self._partial_view(p, by_id)
            return _Shown(p, block, _fit(block, measure, room // 2))

        def merge(group: list[_Shown]) -> _Shown:
            blocks = [s.block for s in group]
            user = render(REDUCE_TEMPLATE, partials=blocks, **ctx)
            out = self._call(REDUCE_TEMPLATE, user, calls)
            parts = [s.partial for s in group]
            return shown(
                _ground(out, user, blocks, dropped, parts[0].first, parts[-1].last, sum(p.sessions for p in parts))
            )

        final = (
            partials[0]
            if len(partials) == 1
            else reduce_levels([shown(p) for p in partials], lambda s: s.size, room, merge).partial
        )
        return Compression(
            summary=final.summary,
            topic_tags=final.topic_tags,
            importance=final.importance,
            entities=final.entities,
            highlights=final.events,
            model=self.name,
            prompt_version=self.prompt_version,
            calls=calls,
            dropped_events=dropped["events"],
            dropped_entities=dropped["entities"],
        )

    def _room(self, template: str, key: str, ctx: dict[str, Any]) -> int:
        """Characters left for blocks in one request of ``template`` (the budget is in estimated tokens)."""
        empty = render(template, part_number=10**6, part_count=10**6, **{key: []}, **ctx)
        return 4 * self.settings.transcript_token_budget - len(empty) - 1

    def _call(self, template: str, user: str, calls: list[ModelCall]) -> PeriodSummary:
        self.request_tokens.append(estimate_tokens(user))
        prompt = ToolPrompt(
            template=template,
            system=self._system,
            user=user,
            tool_name=TOOL_NAME,
            tool_description=TOOL_DESCRIPTION,
            schema=self._schema,
        )
        return self.caller.call(prompt, PeriodSummary, calls)

    @staticmethod
    def _event_views(events: Sequence[SourceEvent], restated: dict[int, str] | None = None) -> list[_EventView]:
        return [
            _EventView(e.id, EVENT_LABELS.get(e.type, e.type), e.who or None, e.due, (restated or {}).get(e.id, e.what))
            for e in events
        ]

    def _episode_view(self, s: SourceEpisode) -> _Block:
        return _Block(
            summary=s.summary,
            topic_tags=list(s.topic_tags),
            events=self._event_views(s.events),
            entities=[f"{n} ({k})" for n, k in s.entities],
            id=s.id,
            date=s.ended_at.date().isoformat(),
            purpose=s.purpose,
            importance=s.importance,
        )

    def _partial_view(self, p: _Partial, by_id: dict[int, SourceEvent]) -> _Block:
        restated = dict(p.events)
        return _Block(
            summary=p.summary,
            topic_tags=list(p.topic_tags),
            events=self._event_views([by_id[i] for i, _ in p.events], restated),
            entities=[f"{e.name} ({e.kind})" for e in p.entities],
            first=p.first.isoformat(),
            last=p.last.isoformat(),
            sessions=p.sessions,
        )


def _ground(
    out: PeriodSummary,
    user: str,
    shown: list[_Block],
    dropped: Counter[str],
    first: dt.date,
    last: dt.date,
    sessions: int,
) -> _Partial:
    """Keep events citing an id shown in this request (once each) and entities named in it."""
    allowed = {e.id for b in shown for e in b.events}
    events: list[tuple[int, str]] = []
    for ev in out.key_events:
        ident = int(ev.source[1:])
        if ident not in allowed:
            dropped["events"] += 1
        elif ident not in {i for i, _ in events}:
            events.append((ident, ev.what))
    entities, ungrounded = ground_entities(out.entities, html.unescape(user))  # names as the model read them
    dropped["entities"] += ungrounded
    return _Partial(out.summary, out.topic_tags, events, entities, out.importance, first, last, sessions)


def _fit(block: _Block, measure: Callable[[_Block], str], limit: int) -> int:
    """Shrink ``block`` in place until its rendered size (+ newline) is at most ``limit``; return the size."""
    size = len(measure(block)) + 1
    while size > limit and block.events:
        block.events.pop()
        block.hidden_events += 1
        size = len(measure(block)) + 1
    if size > limit and block.entities:
        block.entities = []
        size = len(measure(block)) + 1
    if size > limit:
        block.summary = block.summary[: max(len(block.summary) - (size - limit) - 3, 20)] + "..."
        size = len(measure(block)) + 1
    return size
