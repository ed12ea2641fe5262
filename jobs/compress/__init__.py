"""The compress job: old session episodes become one super-summary per (tenant, user, period).

**What qualifies.** A session episode belongs to the calendar period (year, quarter or month, UTC)
that contains its ``ended_at``. A period qualifies once it ended more than ``older_than`` ago: with
``12mo`` on 2026-11-21 the cut-off is 2025-11-21, so years up to 2024 qualify and 2025 does not.
A period with two or more current session episodes gets one super-summary (``kind='super'``,
``period_start``/``period_end`` = the period's first and last day, ``status='current'``); a lone
episode stays as it is.

**What a super-summary holds.** A summary of the period, topic tags, entities, importance and an
embedding, written by a *compressor*: Claude (forced tool ``record_period_summary``, validated by
the pydantic model :class:`PeriodSummary`, prompts ``compress_*.j2``) or the offline merge. Its
events are the period's decisions and the questions and commitments still open, each a copy of
its source event with ``source_event_id`` pointing at it, so every one of them stays reachable
from the super. Claude restates the (at most 20) most important ones with context; every other
carried event is copied verbatim, so nothing is lost to the model's choice or its output limit.
**Evidence of a super event** is the source event's evidence, copied unchanged: indexes of the
messages of the *source session's* transcript (follow ``source_event_id`` to its episode and
transcript), with the source's ``evidence_quote``, ``occurred_at``, ``who``, ``due`` and ``status``.
A lineage row links the super to every source, and each source gets ``compressed_into``: recall
(``status='current' AND compressed_into IS NULL``) then shows the super instead of its sources,
which stay in place for analysts.

**Bounded requests.** Episodes are packed into requests of at most ``transcript_token_budget``
estimated tokens (:func:`jobs.extract.estimate_tokens`; an oversized episode shows fewer events,
which are still carried); partial summaries are merged in requests that hold at least two, level
by level, so no request grows with the length of the period.

**Idempotent, one group per transaction.** A super stores the hash of its source ids
(``content_hash``). A group whose sources, hash and pointers agree is skipped with no read and no
model call. Otherwise the group is read, compressed with no transaction open, and written in one
tenant-scoped transaction under a per-user advisory lock, only if its sources and supers are still
what was read (else it is left for the next run): old supers are superseded (or deleted when a
source of theirs was erased, so no text derived from it survives), the new super, its events,
entities, lineage, the source pointers and the model-call rows commit together. A failed group
leaves no trace but its model-call rows; a re-run completes it. One run at a time: a session
advisory lock; a second runner raises :class:`CompressBusy`.

**Vectors.** A super's embedding is of its summary, tags, highlighted events (at most 5) and
entities; its full-text index covers every carried event. ``purge_embeddings`` drops the vectors of
compressed sources (about 1.5 KB each at 384 dimensions): they are out of recall anyway, but
analysts lose vector search over them, a removed super's sources return to recall without vectors
until re-embedded, and the offline compressor re-embeds them in memory when their period is rebuilt.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import re
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Protocol

import numpy as np
import psycopg
from psycopg.types.json import Jsonb
from pydantic import BaseModel, Field, field_validator

from jobs.config import Settings
from jobs.db import Database
from jobs.embeddings import Embedder, get_embedder
from jobs.errors import ConfigError, EpisodesError
from jobs.llm import ToolCaller, ToolPrompt
from jobs.models import (
    Entity,
    EpisodeExtraction,
    KeyEvent,
    ModelCall,
    episode_text,
    estimate_tokens,
    tool_input_schema,
)
from jobs.prompts import environment, fingerprint, render, source
from jobs.resources import sql_dir
from jobs.runs import worker_id
from jobs.sql import query
from jobs.store import EpisodeRow, insert_episode, record_calls

log = logging.getLogger(__name__)

UNITS = {"year": 12, "quarter": 3, "month": 1}  # period length in months
RUN_LOCK_KEY = 0x6570697363707273  # "episcprs": one compress runner per database
USER_LOCK_NAMESPACE = 0x636D7072  # "cmpr": first key of the per-user transaction lock
TOOL_NAME = "record_period_summary"
TOOL_DESCRIPTION = "Record one summary of a period of the user's sessions."
SYSTEM_TEMPLATE = "compress_system.j2"
SESSIONS_TEMPLATE = "compress_sessions_user.j2"
REDUCE_TEMPLATE = "compress_reduce_user.j2"
OFFLINE_VERSION = "compress-offline-1"
SUMMARY_CHARS = 1200  # offline summary length
EVENT_LABELS = {"decision": "decision", "open_question": "open question", "commitment": "open commitment"}
_HEADER = re.compile(r"^-- name: ([a-z0-9_]+)\s*$", re.MULTILINE)
_AGE = re.compile(r"^\s*(\d+)\s*(mo|months?|y|yrs?|years?|w|weeks?|d|days?)\s*$")


class CompressBusy(EpisodesError):
    """Another compress run is in progress (it holds the compress lock); nothing was done. Try again when it is done."""


@cache
def compress_queries() -> dict[str, str]:
    """The named queries of sql/compress.sql."""
    parts = _HEADER.split((sql_dir() / "compress.sql").read_text(encoding="utf-8"))
    return {name: body.strip() for name, body in zip(parts[1::2], parts[2::2])}


def _q(name: str) -> str:
    return compress_queries()[name]


# ------------------------------------------------------------------------------------------------
# Periods and the cut-off
# ------------------------------------------------------------------------------------------------


def parse_age(text: str) -> tuple[int, int]:
    """``12mo`` / ``2y`` / ``6w`` / ``400d`` -> (months, days)."""
    match = _AGE.match(text.lower())
    if not match:
        raise ConfigError(f"--older-than {text!r} is not an age; use e.g. 12mo, 18mo, 2y, 8w or 400d.")
    n, unit = int(match.group(1)), match.group(2)
    if unit.startswith("mo"):
        return n, 0
    if unit.startswith("y"):
        return 12 * n, 0
    return 0, n * (7 if unit.startswith("w") else 1)


def add_months(day: dt.date, months: int) -> dt.date:
    """``day`` moved by whole calendar months, clamped to the month's last day (Mar 31 - 1 month = Feb 28/29)."""
    year, month0 = divmod(day.year * 12 + day.month - 1 + months, 12)
    following = dt.date(year + (month0 == 11), (month0 + 1) % 12 + 1, 1)
    return dt.date(year, month0 + 1, min(day.day, (following - dt.timedelta(days=1)).day))


def cutoff_time(now: dt.datetime, older_than: str | dt.timedelta) -> dt.datetime:
    if isinstance(older_than, dt.timedelta):
        return now - older_than
    months, days = parse_age(older_than)
    moved = add_months(now.date(), -months)
    return dt.datetime.combine(moved, now.timetz()) - dt.timedelta(days=days)


def period_floor(moment: dt.datetime, unit: str) -> dt.date:
    """First day of the ``unit`` period (UTC) that contains ``moment``."""
    day = moment.astimezone(dt.UTC).date()
    step = UNITS[unit]
    return dt.date(day.year, (day.month - 1) // step * step + 1, 1)


@dataclass(frozen=True)
class Period:
    """A closed range of days; usually one calendar year, quarter or month."""

    start: dt.date
    end: dt.date  # last day, inclusive

    @classmethod
    def of(cls, unit: str, start: dt.date) -> "Period":
        return cls(start, add_months(start, UNITS[unit]) - dt.timedelta(days=1))

    @property
    def start_ts(self) -> dt.datetime:
        return dt.datetime.combine(self.start, dt.time(), dt.UTC)

    @property
    def end_ts(self) -> dt.datetime:
        """Exclusive upper bound: midnight UTC after the last day."""
        return dt.datetime.combine(self.end + dt.timedelta(days=1), dt.time(), dt.UTC)

    @property
    def label(self) -> str:
        s, nxt = self.start, self.end + dt.timedelta(days=1)
        if s.day == 1 and nxt == add_months(s, 12) and s.month == 1:
            return f"{s.year}"
        if s.day == 1 and nxt == add_months(s, 3) and s.month % 3 == 1:
            return f"{s.year}-Q{(s.month - 1) // 3 + 1}"
        if s.day == 1 and nxt == add_months(s, 1):
            return f"{s.year}-{s.month:02d}"
        return f"{s.isoformat()} to {self.end.isoformat()}"

    def contains(self, start: dt.date, end: dt.date) -> bool:
        return self.start <= start and end <= self.end


def sources_hash(ids: Sequence[int]) -> str:
    """Identity of a super's source set; stored as its content_hash."""
    return "src-" + hashlib.sha256(",".join(str(i) for i in sorted(ids)).encode()).hexdigest()[:32]


# ------------------------------------------------------------------------------------------------
# What compressors read and return
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceEvent:
    """A carried event of a source episode: a decision, or a question or commitment still open."""

    id: int
    episode_id: int
    ordinal: int
    type: str
    what: str
    who: str | None
    due: dt.date | None
    occurred_at: dt.datetime
    evidence: tuple[int, ...]


@dataclass(frozen=True)
class SourceEpisode:
    id: int
    purpose: str
    summary: str
    topic_tags: tuple[str, ...]
    importance: float
    started_at: dt.datetime
    ended_at: dt.datetime
    events: tuple[SourceEvent, ...]
    entities: tuple[tuple[str, str], ...]  # (name, kind)
    embedding: np.ndarray | None = None
    compressed_into: int | None = None

    def text(self) -> str:
        return episode_text(self.summary, self.topic_tags, [e.what for e in self.events], [n for n, _ in self.entities])


@dataclass
class Compression:
    """A compressor's result. ``highlights`` are (source event id, restated sentence), best first."""

    summary: str
    topic_tags: list[str]
    importance: float
    entities: list[Entity]
    highlights: list[tuple[int, str]]
    model: str
    prompt_version: str
    calls: list[ModelCall] = field(default_factory=list)
    dropped_events: int = 0
    dropped_entities: int = 0


class Compressor(Protocol):
    name: str
    prompt_version: str

    def compress(self, period: Period, sources: Sequence[SourceEpisode]) -> Compression: ...


def _tag_list(tags: Sequence[str], limit: int = 5) -> list[str]:
    seen: list[str] = []
    for tag in tags:
        clean = " ".join(tag.strip().lower().split())[:40]
        if clean and clean not in seen:
            seen.append(clean)
    return seen[:limit]


# ------------------------------------------------------------------------------------------------
# The offline compressor
# ------------------------------------------------------------------------------------------------


class OfflineCompressor:
    """Deterministic merge, no network: lower quality than Claude, labelled ``model='offline'``.

    Summary: the sources scoring highest on importance + centrality (cosine of the episode's
    embedding to the period's mean), in date order, after a line saying it is an offline merge.
    Tags and entities: the most frequent across the period (ties: first seen). Importance: the
    period's highest. Events: all carried events, copied (no highlights).
    """

    name = "offline"
    prompt_version = OFFLINE_VERSION

    def __init__(self, embedder: Embedder | None = None, settings: Settings | None = None) -> None:
        self._embedder = embedder
        self._embedder_name = settings.embedder if settings else "minilm"

    def compress(self, period: Period, sources: Sequence[SourceEpisode]) -> Compression:
        n = len(sources)
        vectors = self._vectors(sources)
        unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        mean = unit.mean(axis=0)
        centrality = unit @ (mean / max(float(np.linalg.norm(mean)), 1e-12))
        scores = [float(s.importance) + float(c) for s, c in zip(sources, centrality)]
        ranked = sorted(range(n), key=lambda i: (-round(scores[i], 6), sources[i].ended_at, sources[i].id))
        first, last = sources[0].ended_at.date(), sources[-1].ended_at.date()
        head = f"Offline merge of {n} sessions from {first} to {last}."
        chosen: list[int] = []
        used = len(head)
        for i in ranked[:3]:
            piece = len(sources[i].summary) + 14
            if chosen and used + piece > SUMMARY_CHARS:
                break
            chosen.append(i)
            used += piece
        parts = [f"{sources[i].ended_at.date()}: {sources[i].summary.strip()}" for i in sorted(chosen)]
        summary = " ".join([head, *parts])
        if len(summary) > SUMMARY_CHARS:
            summary = summary[:SUMMARY_CHARS - 3].rstrip() + "..."
        tags: Counter[str] = Counter()
        order: dict[str, int] = {}
        names: Counter[tuple[str, str]] = Counter()
        shown: dict[tuple[str, str], str] = {}
        for s in sources:
            for tag in s.topic_tags:
                tags[tag] += 1
                order.setdefault(tag, len(order))
            for name, kind in dict.fromkeys(s.entities):
                key = (name.casefold(), kind)
                names[key] += 1
                shown.setdefault(key, name)
        top_tags = sorted(tags, key=lambda t: (-tags[t], order[t]))
        first_seen = {k: i for i, k in enumerate(shown)}
        top_names = sorted(shown, key=lambda k: (-names[k], first_seen[k]))[:30]
        return Compression(
            summary=summary, topic_tags=_tag_list(top_tags), importance=max(float(s.importance) for s in sources),
            entities=[Entity.model_construct(name=shown[k], kind=k[1]) for k in top_names], highlights=[],
            model=self.name, prompt_version=self.prompt_version,
        )

    def _vectors(self, sources: Sequence[SourceEpisode]) -> np.ndarray:
        """Stored embeddings; sources whose vectors were purged are embedded again, in memory."""
        missing = [i for i, s in enumerate(sources) if s.embedding is None]
        fresh: dict[int, np.ndarray] = {}
        if missing:
            embedder = self._embedder or get_embedder(self._embedder_name)
            fresh = dict(zip(missing, embedder.embed([sources[i].text() for i in missing])))
        return np.stack([np.asarray(fresh[i] if i in fresh else s.embedding, dtype=np.float32)
                         for i, s in enumerate(sources)])


# ------------------------------------------------------------------------------------------------
# Claude: forced tool, validated, hierarchical within the token budget
# ------------------------------------------------------------------------------------------------


class PeriodEvent(BaseModel):
    """One of the period's key events, restated, citing the source event it rests on."""

    source: str = Field(
        pattern=r"^E[0-9]{1,18}$",
        description="The id of the one source event this restates, exactly as shown in brackets, e.g. E123.",
    )
    what: str = Field(
        min_length=3, max_length=400,
        description=("One self-contained sentence in the third person with the concrete details (names, amounts, "
                     "dates), understandable without the sessions."),
    )


class PeriodSummary(BaseModel):
    """A summary of one period of a user's sessions, for an agent that meets this user years later."""

    summary: str = Field(
        min_length=10, max_length=1600,
        description=("2-5 sentences, at most 300 tokens, third person, past tense: what the user worked on over the "
                     "period, what was decided and what is still open. Name people and things; organise by theme."),
    )
    topic_tags: list[str] = Field(
        max_length=5,
        description="Up to 5 short lowercase topic tags (1-3 words each) for the period, most important first.",
    )
    key_events: list[PeriodEvent] = Field(
        default_factory=list, max_length=20,
        description=("The period's most important decisions, still-open questions and open commitments, most "
                     "important first, each citing exactly one source event id from the input. Events not listed "
                     "are kept automatically; never invent an id."),
    )
    entities: list[Entity] = Field(
        default_factory=list, max_length=30,
        description="The people, organisations, products, projects and places that matter across the period.",
    )
    importance: float = Field(
        ge=0.0, le=1.0,
        description=("How much this period matters for future sessions with this user: 0.1 small talk, "
                     "0.5 routine work, 0.8+ major decisions or commitments."),
    )

    @field_validator("topic_tags")
    @classmethod
    def _tags(cls, tags: list[str]) -> list[str]:
        return _tag_list(tags)


def prompt_version() -> str:
    """Changes whenever a compress template or the output schema changes (stored on each super)."""
    schema = tool_input_schema(PeriodSummary)
    return "compress-" + fingerprint(source(SYSTEM_TEMPLATE), source(SESSIONS_TEMPLATE), source(REDUCE_TEMPLATE),
                                     json.dumps(schema, sort_keys=True))


def _clean(text: str) -> str:
    """One line, and no markup that could close the input's delimiters."""
    return " ".join(str(text).split()).replace("<", "&lt;")


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
    summary: str
    topic_tags: list[str]
    events: list[tuple[int, str]]
    entities: list[Entity]
    importance: float
    first: dt.date
    last: dt.date
    sessions: int


@cache
def _macro(template: str, name: str) -> Callable[[_Block], str]:
    module = environment().get_template(template).make_module(
        {"tool_name": TOOL_NAME, "part_number": 1, "part_count": 1, "period": "", "session_count": 0,
         "episodes": [], "partials": []})
    return getattr(module, name)


class AnthropicCompressor:
    """Compress with Claude (EPISODES_MODEL) through :class:`jobs.llm.ToolCaller`."""

    def __init__(self, settings: Settings, caller: ToolCaller | None = None) -> None:
        self.settings = settings
        self.caller = caller or ToolCaller(settings)
        self.name = settings.model
        self.prompt_version = prompt_version()
        self._schema = tool_input_schema(PeriodSummary)
        self._system = render(SYSTEM_TEMPLATE, tool_name=TOOL_NAME)
        # Estimated tokens of the latest user messages sent, for the budget check of tests and benchmarks.
        self.request_tokens: deque[int] = deque(maxlen=1_000_000)

    def close(self) -> None:
        self.caller.close()

    def __enter__(self) -> "AnthropicCompressor":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def compress(self, period: Period, sources: Sequence[SourceEpisode]) -> Compression:
        calls: list[ModelCall] = []
        dropped = Counter()
        by_id = {e.id: e for s in sources for e in s.events}
        ctx = {"tool_name": TOOL_NAME, "period": period.label, "session_count": len(sources)}
        try:
            views = [self._episode_view(s) for s in sources]
            chunks = self._pack(SESSIONS_TEMPLATE, "episode_block", "episodes", views, ctx, per_item=1)
            partials = []
            for n, chunk in enumerate(chunks, start=1):
                blocks = [views[i] for i in chunk]
                user = render(SESSIONS_TEMPLATE, part_number=n, part_count=len(chunks), episodes=blocks, **ctx)
                out = self._call(SESSIONS_TEMPLATE, user, calls)
                picked = [sources[i] for i in chunk]
                partials.append(self._ground(out, user, blocks, dropped, picked[0].ended_at.date(),
                                             picked[-1].ended_at.date(), len(picked)))
            while len(partials) > 1:
                blocks = [self._partial_view(p, by_id) for p in partials]
                merged = []
                for chunk in self._pack(REDUCE_TEMPLATE, "partial_block", "partials", blocks, ctx, per_item=2):
                    group = [partials[i] for i in chunk]
                    if len(group) == 1:
                        merged.append(group[0])
                        continue
                    shown = [blocks[i] for i in chunk]
                    user = render(REDUCE_TEMPLATE, partials=shown, **ctx)
                    out = self._call(REDUCE_TEMPLATE, user, calls)
                    merged.append(self._ground(out, user, shown, dropped, group[0].first, group[-1].last,
                                               sum(p.sessions for p in group)))
                partials = merged
        except EpisodesError as exc:
            exc.calls = calls  # type: ignore[attr-defined]  # failed calls are recorded too
            raise
        final = partials[0]
        return Compression(
            summary=final.summary, topic_tags=final.topic_tags, importance=final.importance,
            entities=final.entities, highlights=final.events, model=self.name, prompt_version=self.prompt_version,
            calls=calls, dropped_events=dropped["events"], dropped_entities=dropped["entities"],
        )

    def _call(self, template: str, user: str, calls: list[ModelCall]) -> PeriodSummary:
        self.request_tokens.append(estimate_tokens(user))
        prompt = ToolPrompt(template=template, system=self._system, user=user, tool_name=TOOL_NAME,
                            tool_description=TOOL_DESCRIPTION, schema=self._schema)
        return self.caller.call(prompt, PeriodSummary, calls)

    @staticmethod
    def _event_views(events: Sequence[SourceEvent], restated: dict[int, str] | None = None) -> list[_EventView]:
        return [_EventView(e.id, EVENT_LABELS.get(e.type, e.type), _clean(e.who) if e.who else None, e.due,
                           _clean((restated or {}).get(e.id, e.what))) for e in events]

    def _episode_view(self, s: SourceEpisode) -> _Block:
        return _Block(summary=_clean(s.summary), topic_tags=[_clean(t) for t in s.topic_tags],
                      events=self._event_views(s.events), entities=[_clean(f"{n} ({k})") for n, k in s.entities],
                      id=s.id, date=s.ended_at.date().isoformat(), purpose=s.purpose, importance=s.importance)

    def _partial_view(self, p: _Partial, by_id: dict[int, SourceEvent]) -> _Block:
        restated = dict(p.events)
        return _Block(summary=_clean(p.summary), topic_tags=list(p.topic_tags),
                      events=self._event_views([by_id[i] for i, _ in p.events], restated),
                      entities=[_clean(f"{e.name} ({e.kind})") for e in p.entities],
                      first=p.first.isoformat(), last=p.last.isoformat(), sessions=p.sessions)

    def _pack(self, template: str, macro: str, key: str, blocks: list[_Block], ctx: dict[str, Any],
              per_item: int) -> list[list[int]]:
        """Consecutive chunks of block indexes whose rendered request fits the budget.

        Each block is first shrunk (fewer events shown, then no entities, then a shorter summary) to
        1/``per_item`` of the room, so reduce requests always merge at least two partials.
        """
        empty = render(template, part_number=10**6, part_count=10**6, **{key: []}, **ctx)
        room = 4 * self.settings.transcript_token_budget - len(empty) - 1
        cap = room // per_item
        measure = _macro(template, macro)
        sizes = [_fit(b, measure, cap) for b in blocks]
        chunks: list[list[int]] = [[]]
        used = 0
        for i, size in enumerate(sizes):
            if chunks[-1] and used + size > room:
                chunks.append([])
                used = 0
            chunks[-1].append(i)
            used += size
        return chunks

    @staticmethod
    def _ground(out: PeriodSummary, user: str, shown: list[_Block], dropped: Counter, first: dt.date,
                last: dt.date, sessions: int) -> _Partial:
        """Keep events citing an id shown in this request (once each) and entities named in it."""
        allowed = {e.id for b in shown for e in b.events}
        events: list[tuple[int, str]] = []
        for ev in out.key_events:
            ident = int(ev.source[1:])
            if ident not in allowed:
                dropped["events"] += 1
            elif ident not in {i for i, _ in events}:
                events.append((ident, ev.what))
        haystack = user.casefold()
        entities: list[Entity] = []
        for ent in out.entities:
            key = ent.name.strip().casefold()
            if not key or key not in haystack:
                dropped["entities"] += 1
            elif all((key, ent.kind) != (e.name.casefold(), e.kind) for e in entities):
                entities.append(ent.model_copy(update={"name": ent.name.strip()}))
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
        block.summary = block.summary[:max(len(block.summary) - (size - limit) - 3, 20)] + "..."
        size = len(measure(block)) + 1
    return size


def make_compressor(settings: Settings, name: str | None = None, embedder: Embedder | None = None) -> Compressor:
    """anthropic, offline, or auto (anthropic when a key is configured) — as the summarize job picks."""
    chosen = name or settings.resolved_extractor
    if chosen == "auto":
        chosen = settings.resolved_extractor
    if chosen == "anthropic":
        return AnthropicCompressor(settings)
    if chosen == "offline":
        return OfflineCompressor(embedder, settings)
    raise ConfigError(f"unknown compressor {chosen!r}; use anthropic or offline")


# ------------------------------------------------------------------------------------------------
# One group: read, compress (no transaction open), write
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Super:
    id: int
    status: str
    period_start: dt.date
    period_end: dt.date
    content_hash: str | None
    lineage: tuple[int, ...]

    @property
    def damaged(self) -> bool:
        """A source of this super was deleted (lineage cascades): its text must not survive."""
        return sources_hash(self.lineage) != self.content_hash


@dataclass(frozen=True)
class _State:
    source_ids: tuple[int, ...]
    pointers: tuple[int | None, ...]
    supers: tuple[_Super, ...]

    @property
    def current(self) -> list[_Super]:
        return [s for s in self.supers if s.status == "current"]

    def key(self) -> tuple[Any, ...]:
        return (self.source_ids, tuple((s.id, s.status, s.content_hash) for s in self.supers))

    def action(self, period: Period, *, force: bool = False) -> str:
        current = self.current
        if any(not period.contains(s.period_start, s.period_end) for s in current):
            return "skipped"  # compressed into a longer period: leave it to that period's runs
        if len(self.source_ids) < 2:
            return "removed" if current else "single"
        exact = [s for s in current if (s.period_start, s.period_end) == (period.start, period.end)]
        if (not force and len(current) == 1 and exact and exact[0].content_hash == sources_hash(self.source_ids)
                and all(p == exact[0].id for p in self.pointers)):
            return "unchanged"
        return "rebuilt" if current else "created"


@dataclass
class _Outcome:
    outcome: str
    sources: int = 0
    calls: list[ModelCall] = field(default_factory=list)
    error: str | None = None
    super_id: int | None = None


def _scope(tenant_id: str, user_id: str, period: Period) -> dict[str, Any]:
    return {"tenant_id": tenant_id, "user_id": user_id, "start": period.start_ts, "end": period.end_ts,
            "period_start": period.start, "period_end": period.end}


def _state(conn: psycopg.Connection, scope: dict[str, Any], rows: Sequence[dict[str, Any]]) -> _State:
    ids = sorted(r["id"] for r in rows)
    pointers = [r["compressed_into"] for r in sorted(rows, key=lambda r: r["id"])]
    linked = conn.execute(_q("compress_linked_supers"),
                          {**scope, "ids": sorted({p for p in pointers if p is not None})}).fetchall()
    supers = tuple(_Super(r["id"], r["status"], r["period_start"], r["period_end"], r["content_hash"],
                          tuple(r["lineage"])) for r in linked)
    return _State(tuple(ids), tuple(pointers), supers)


def _read(db: Database, scope: dict[str, Any]) -> tuple[_State, list[SourceEpisode]]:
    with db.tenant(scope["tenant_id"]) as conn:
        rows = conn.execute(_q("compress_group_sources"), scope).fetchall()
        state = _state(conn, scope, rows)
        ids = [r["id"] for r in rows]
        events: dict[int, list[SourceEvent]] = {}
        for e in conn.execute(_q("compress_source_events"), {"ids": ids}):
            events.setdefault(e["episode_id"], []).append(SourceEvent(
                e["id"], e["episode_id"], e["ordinal"], e["type"], e["what"], e["who"], e["due"], e["occurred_at"],
                tuple(e["evidence"])))
        entities: dict[int, list[tuple[str, str]]] = {}
        for e in conn.execute(_q("compress_source_entities"), {"ids": ids}):
            entities.setdefault(e["episode_id"], []).append((e["name"], e["kind"]))
    sources = [SourceEpisode(
        id=r["id"], purpose=r["purpose"], summary=r["summary"], topic_tags=tuple(r["topic_tags"] or ()),
        importance=float(r["importance"]), started_at=r["started_at"], ended_at=r["ended_at"],
        events=tuple(events.get(r["id"], ())), entities=tuple(entities.get(r["id"], ())),
        embedding=None if r["embedding"] is None else r["embedding"].to_numpy(), compressed_into=r["compressed_into"],
    ) for r in rows]
    return state, sources


def super_episode(sources: Sequence[SourceEpisode], comp: Compression) -> tuple[EpisodeExtraction, list[int]]:
    """The super's episode: highlights first (restated), then every other carried event (copied), by time."""
    by_id = {e.id: e for s in sources for e in s.events}
    chosen = [(by_id[i], what) for i, what in comp.highlights if i in by_id]
    seen = {e.id for e, _ in chosen}
    rest = sorted((e for e in by_id.values() if e.id not in seen),
                  key=lambda e: (e.occurred_at, e.episode_id, e.ordinal))
    events = [*chosen, *((e, e.what) for e in rest)]
    episode = EpisodeExtraction.model_construct(
        summary=comp.summary, topic_tags=list(comp.topic_tags), importance=float(comp.importance),
        key_events=[KeyEvent.model_construct(type=e.type, what=what, evidence=list(e.evidence), who=e.who or "user",
                                             due=e.due) for e, what in events],
        entities=list(comp.entities),
    )
    return episode, [e.id for e, _ in events]


def _lock_user(conn: psycopg.Connection, scope: dict[str, Any]) -> None:
    conn.execute(_q("compress_lock_user"), {**scope, "namespace": USER_LOCK_NAMESPACE})


def _damaged_history(conn: psycopg.Connection, scope: dict[str, Any]) -> list[int]:
    """Superseded supers in the period that a deleted source belonged to."""
    history = conn.execute(_q("compress_history_supers"), scope).fetchall()
    return [h["id"] for h in history if sources_hash(h["lineage"]) != h["content_hash"]]


def _retire(conn: psycopg.Connection, scope: dict[str, Any], state: _State, *, delete_all: bool) -> list[int]:
    """Delete damaged supers (and damaged history in the period); supersede the others. Returns those kept."""
    doomed = _damaged_history(conn, scope)
    keep = []
    for s in state.current:
        (doomed if delete_all or s.damaged else keep).append(s.id)
    if doomed:
        conn.execute(_q("compress_delete_supers"), {"ids": doomed})
    if keep:
        conn.execute(_q("compress_supersede_supers"), {"ids": keep})
    return keep


@dataclass
class _Prepared:
    """A group read and compressed, waiting for its embedding and its write."""

    tenant_id: str
    user_id: str
    period: Period
    state: _State
    sources: list[SourceEpisode]
    action: str
    comp: Compression | None = None
    episode: EpisodeExtraction | None = None
    source_event_ids: list[int] = field(default_factory=list)
    done: _Outcome | None = None  # set when there is nothing to write

    @property
    def scope(self) -> dict[str, Any]:
        return _scope(self.tenant_id, self.user_id, self.period)

    def vector_text(self) -> str | None:
        """What a super's vector embeds: summary, tags, the (at most 5) highlighted events, entities.

        Every carried event goes into the full-text index; the vector leaves the long tail out, as
        all-MiniLM-L6-v2 reads only the first 256 word pieces anyway (and 4x faster without them).
        """
        if self.episode is None or self.comp is None:
            return None
        ep = self.episode
        shown = [e.what for e in ep.key_events[:min(len(self.comp.highlights), 5)]]
        return episode_text(ep.summary, ep.topic_tags, shown, [e.name for e in ep.entities])


def prepare_group(
    db: Database, tenant_id: str, user_id: str, period: Period, *, compressor: Callable[[], Compressor],
    job_run_id: int | None = None, force: bool = False, only_compressed: bool = False,
) -> _Prepared:
    """Read one (tenant, user, period), decide, and compress it (model calls, no transaction open)."""
    state, sources = _read(db, _scope(tenant_id, user_id, period))
    prep = _Prepared(tenant_id, user_id, period, state, sources, state.action(period, force=force))
    if only_compressed and not state.current and prep.action in ("created", "rebuilt"):
        prep.done = _Outcome("uncompressed")
    elif prep.action in ("unchanged", "single", "skipped"):
        prep.done = _Outcome(prep.action)
    elif prep.action != "removed":
        try:
            prep.comp = compressor().compress(period, sources)
            prep.episode, prep.source_event_ids = super_episode(sources, prep.comp)
        except ConfigError:
            raise
        except Exception as exc:  # noqa: BLE001 - one bad group never stops the run
            prep.done = _failed(db, prep, exc, list(getattr(exc, "calls", None) or []), job_run_id)
    return prep


def _failed(db: Database, prep: _Prepared, exc: BaseException, calls: list[ModelCall],
            job_run_id: int | None) -> _Outcome:
    """Record the failed group's model calls (and nothing else): the group stays as it was."""
    if not isinstance(exc, EpisodesError):
        log.exception("unexpected compress failure", extra={"action": "compress_error", "tenant": prep.tenant_id})
    with db.tenant(prep.tenant_id) as conn:
        record_calls(conn, calls, tenant_id=prep.tenant_id, user_id=prep.user_id, transcript_id=None,
                     job_run_id=job_run_id)
    log.warning("compress failed: %s", exc, extra={"action": "compress_failed", "tenant": prep.tenant_id,
                                                   "user": prep.user_id, "period": prep.period.label})
    return _Outcome("failed", calls=calls, error=f"{prep.tenant_id}/{prep.user_id} {prep.period.label}: {exc}")


def write_group(db: Database, prep: _Prepared, vector: np.ndarray | None, job_run_id: int | None = None) -> _Outcome:
    """One tenant-scoped transaction: retire old supers, insert the new one with its events, entities,
    lineage, source pointers and model-call rows, only if the group is still as it was read."""
    if prep.done is not None:
        return prep.done
    comp, scope, state, sources = prep.comp, prep.scope, prep.state, prep.sources
    calls = comp.calls if comp else []
    with db.tenant(prep.tenant_id) as conn:
        _lock_user(conn, scope)
        fresh = _state(conn, scope, conn.execute(_q("compress_lock_group_sources"), scope).fetchall())
        if fresh.key() != state.key():  # changed since it was read: the next run picks it up
            record_calls(conn, calls, tenant_id=prep.tenant_id, user_id=prep.user_id, transcript_id=None,
                         job_run_id=job_run_id)
            return _Outcome("changed", calls=calls)
        if comp is None or prep.episode is None:
            _retire(conn, scope, fresh, delete_all=True)
            return _Outcome("removed")
        kept = _retire(conn, scope, fresh, delete_all=False)
        purposes = {s.purpose for s in sources}
        row = EpisodeRow(
            tenant_id=prep.tenant_id, user_id=prep.user_id, kind="super", episode=prep.episode,
            started_at=min(s.started_at for s in sources), ended_at=max(s.ended_at for s in sources),
            model=comp.model, prompt_version=comp.prompt_version, embedding=vector,
            purpose=purposes.pop() if len(purposes) == 1 else "general", content_hash=sources_hash(state.source_ids),
            period_start=prep.period.start, period_end=prep.period.end, calls=comp.calls,
            dropped_events=comp.dropped_events, dropped_entities=comp.dropped_entities,
        )
        new_id = insert_episode(conn, row, source_event_ids=prep.source_event_ids)
        ids = {"super_id": new_id, "source_ids": list(state.source_ids), **scope}
        conn.execute(_q("compress_event_provenance"), ids)
        conn.execute(_q("compress_insert_lineage"), ids)
        conn.execute(_q("compress_point_sources"), ids)
        if kept:
            conn.execute(_q("compress_link_superseded"), {"ids": kept, "new_id": new_id})
        record_calls(conn, calls, tenant_id=prep.tenant_id, user_id=prep.user_id, transcript_id=None,
                     job_run_id=job_run_id)
    log.debug("super-summary stored", extra={"action": "compress_group", "tenant": prep.tenant_id,
                                             "user": prep.user_id, "period": prep.period.label,
                                             "sources": len(sources), "super_id": new_id})
    return _Outcome(prep.action, sources=len(sources), calls=calls, super_id=new_id)


def embed_prepared(db: Database, batch: Sequence[_Prepared], embedder: Callable[[], Embedder],
                   job_run_id: int | None = None) -> list[np.ndarray | None]:
    """One embedding call for a batch of prepared groups (batching is ~3x faster on a CPU)."""
    todo = [i for i, p in enumerate(batch) if p.done is None and p.vector_text() is not None]
    vectors: list[np.ndarray | None] = [None] * len(batch)
    if not todo:
        return vectors
    try:
        for i, vector in zip(todo, embedder().embed([batch[i].vector_text() or "" for i in todo])):
            vectors[i] = vector
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - the batch's groups fail, the run goes on
        for i in todo:
            batch[i].done = _failed(db, batch[i], exc, list(batch[i].comp.calls if batch[i].comp else []),
                                    job_run_id)
    return vectors


def process_group(
    db: Database, tenant_id: str, user_id: str, period: Period, *, compressor: Callable[[], Compressor],
    embedder: Callable[[], Embedder], job_run_id: int | None = None, force: bool = False,
    only_compressed: bool = False,
) -> _Outcome:
    """Bring one (tenant, user, period) up to date; see the module docstring."""
    prep = prepare_group(db, tenant_id, user_id, period, compressor=compressor, job_run_id=job_run_id,
                         force=force, only_compressed=only_compressed)
    (vector,) = embed_prepared(db, [prep], embedder, job_run_id)
    return write_group(db, prep, vector, job_run_id)


# ------------------------------------------------------------------------------------------------
# The run
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlannedGroup:
    tenant_id: str
    user_id: str
    period: Period
    source_ids: tuple[int, ...]
    into_ids: tuple[int, ...]
    uncompressed: int
    super_id: int | None
    super_hash: str | None

    @property
    def action(self) -> str:
        """What the plan expects (the group's own read decides): created, rebuilt, removed, unchanged, single."""
        n = len(self.source_ids)
        linked = self.super_id is not None or bool(self.into_ids)
        if (n >= 2 and self.super_id is not None and self.super_hash == sources_hash(self.source_ids)
                and set(self.into_ids) == {self.super_id} and self.uncompressed == 0):
            return "unchanged"
        if n < 2:
            return "removed" if linked else "single"
        return "rebuilt" if linked else "created"


@dataclass
class CompressReport:
    period: str
    cutoff: dt.datetime
    boundary: dt.date
    dry_run: bool = False
    counts: Counter = field(default_factory=Counter)
    planned: list[PlannedGroup] = field(default_factory=list)
    sources: int = 0  # session episodes compressed by this run
    call_tokens: list[int] = field(default_factory=list)  # input tokens (incl. cached) per model call
    output_tokens: int = 0
    cost_usd: float = 0.0
    purged: int = 0
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)

    @property
    def failed(self) -> int:
        return self.counts["failed"]

    def line(self) -> str:
        order = ["created", "rebuilt", "removed", "unchanged", "failed", "changed", "skipped"]
        verb = "would be " if self.dry_run else ""
        parts = [f"{verb}{k} {self.counts[k]}" for k in order if self.counts[k] or k in ("created", "unchanged")]
        tokens = (f" · model calls {len(self.call_tokens)} · tokens {sum(self.call_tokens):,} in / "
                  f"{self.output_tokens:,} out (max {max(self.call_tokens, default=0):,} per call) · "
                  f"est. cost ${self.cost_usd:.4f}") if not self.dry_run else ""
        purged = f" · embeddings purged {self.purged}" if self.purged else ""
        return (f"compress {self.period}s ending before {self.boundary}: " + " · ".join(parts)
                + f" · sessions compressed {self.sources}{tokens}{purged} · {self.seconds:.1f}s")


def plan(db: Database, period: str, boundary: dt.date, tenant: str | None = None,
         user: str | None = None) -> list[PlannedGroup]:
    with db.admin() as conn:
        rows = conn.execute(_q("compress_plan"), {
            "unit": period, "months": UNITS[period], "boundary": boundary, "tenant": tenant, "user": user,
        }).fetchall()
    return [PlannedGroup(r["tenant_id"], r["user_id"], Period.of(period, r["period_start"]), tuple(r["source_ids"]),
                         tuple(r["into_ids"]), int(r["uncompressed"]), r["super_id"], r["super_hash"]) for r in rows]


@contextmanager
def run_lock(db: Database) -> Iterator[None]:
    """The single-runner lock; raises CompressBusy when another run holds it."""
    conn = db.connect(autocommit=True)
    try:
        if not conn.execute(_q("compress_try_lock"), {"key": RUN_LOCK_KEY}).fetchone()["locked"]:
            log.warning("another compress run holds the lock", extra={"action": "compress_busy"})
            raise CompressBusy()
        try:
            yield
        finally:
            conn.execute(_q("compress_unlock"), {"key": RUN_LOCK_KEY})
    finally:
        conn.close()


class _Lazy:
    """Builds the compressor and the embedder only when a group needs them (a no-op run needs neither)."""

    def __init__(self, settings: Settings, compressor: Compressor | None, embedder: Embedder | None) -> None:
        self.settings = settings
        self._compressor, self._embedder = compressor, embedder
        self._own = compressor is None
        self._lock = threading.Lock()

    def compressor(self) -> Compressor:
        with self._lock:
            if self._compressor is None:
                self._compressor = make_compressor(self.settings, embedder=self._embedder)
            return self._compressor

    def embedder(self) -> Embedder:
        with self._lock:
            if self._embedder is None:
                self._embedder = get_embedder(self.settings.embedder)
            return self._embedder

    def close(self) -> None:
        if self._own and self._compressor is not None and hasattr(self._compressor, "close"):
            self._compressor.close()


def run_compress(
    db: Database, *, older_than: str | dt.timedelta = "12mo", period: str = "year", tenant: str | None = None,
    user: str | None = None, dry_run: bool = False, compressor: Compressor | None = None,
    now: dt.datetime | None = None, purge_embeddings: bool = False, concurrency: int = 1,
    embedder: Embedder | None = None, progress: Callable[[int], None] | None = None, batch_size: int = 32,
    record_run: bool = True,
) -> CompressReport:
    """Compress every qualifying (tenant, user, period); see the module docstring. Safe to re-run.

    ``compressor`` None picks one like the summarize job (Claude with an API key, else offline), and
    only if some group needs it. ``dry_run`` reads the plan only: no lock, no model call, no write.
    Groups are read and compressed ``concurrency`` at a time, embedded ``batch_size`` at a time, and
    each is written in its own transaction. ``record_run`` False leaves the ``job_runs`` row to the
    caller (the scheduler records its own).
    """
    if period not in UNITS:
        raise ConfigError(f"period {period!r} is unknown; use year, quarter or month.")
    now = now or dt.datetime.now(dt.UTC)
    now = now if now.tzinfo else now.replace(tzinfo=dt.UTC)
    cutoff = cutoff_time(now, older_than)
    boundary = period_floor(cutoff, period)
    report = CompressReport(period=period, cutoff=cutoff, boundary=boundary, dry_run=dry_run)
    started = time.perf_counter()
    if dry_run:
        for group in plan(db, period, boundary, tenant, user):
            report.counts[group.action] += 1
            if group.action in ("created", "rebuilt", "removed"):
                report.planned.append(group)
        report.seconds = time.perf_counter() - started
        return report
    with run_lock(db):
        groups = []
        for group in plan(db, period, boundary, tenant, user):
            if group.action in ("unchanged", "single"):
                report.counts[group.action] += 1  # nothing to read, no model call
            else:
                groups.append(group)
        run_id = None
        if record_run:
            with db.admin() as conn:
                run = conn.execute(query("start_job_run"), {"job": "compress", "worker": worker_id()}).fetchone()
                run_id = run["id"]
        lazy = _Lazy(db.settings, compressor, embedder)
        fatal: list[BaseException] = []

        def prepare(group: PlannedGroup) -> _Prepared | None:
            if fatal:
                return None
            try:
                return prepare_group(db, group.tenant_id, group.user_id, group.period, compressor=lazy.compressor,
                                     job_run_id=run_id)
            except ConfigError as exc:
                fatal.append(exc)
                return None

        def tally(result: _Outcome) -> None:
            report.counts[result.outcome] += 1
            report.sources += result.sources
            report.call_tokens += [c.input_tokens + c.cache_read_tokens + c.cache_write_tokens for c in result.calls]
            report.output_tokens += sum(c.output_tokens for c in result.calls)
            report.cost_usd += sum(c.cost_usd for c in result.calls)
            if result.error:
                report.errors.append(result.error)
            if progress:
                progress(1)

        pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="compress") if concurrency > 1 else None
        try:
            for at in range(0, len(groups), batch_size):
                chunk = groups[at:at + batch_size]
                prepared = list(pool.map(prepare, chunk) if pool else map(prepare, chunk))
                if fatal:
                    break
                ready = [p for p in prepared if p is not None]
                vectors = embed_prepared(db, ready, lazy.embedder, run_id)
                writes = [(p, v) for p, v in zip(ready, vectors)]
                for result in (pool.map(lambda pv: write_group(db, pv[0], pv[1], run_id), writes) if pool
                               else (write_group(db, p, v, run_id) for p, v in writes)):
                    tally(result)
            if purge_embeddings and not fatal:
                with db.admin() as conn:
                    purge = conn.execute(_q("compress_purge_embeddings"), {"tenant": tenant, "user": user})
                    report.purged = purge.rowcount
        finally:
            if pool:
                pool.shutdown()
            lazy.close()
            report.seconds = time.perf_counter() - started
            if run_id is not None:
                _finish_run(db, run_id, report, fatal)
    if fatal:
        raise fatal[0]
    return report


def _finish_run(db: Database, run_id: int, report: CompressReport, fatal: list[BaseException]) -> None:
    with db.admin() as conn:
        conn.execute(query("finish_job_run"), {
            "id": run_id, "status": "failed" if fatal else "ok",
            "counts": Jsonb({k: v for k, v in report.counts.items() if v}),
            "error": str(fatal[0]) if fatal else ("; ".join(report.errors)[:2000] or None),
        })


def scheduled_compress(db: Database) -> dict[str, int]:
    """The yearly job of `episodes serve`: the defaults (12mo, year, compressor from the settings).

    The scheduler records the run with the counts returned here. A compress run already in progress
    (e.g. from the CLI) is not an error: the counts say ``busy``. Failed periods are counted
    (``failed``) and completed by the next run.
    """
    try:
        report = run_compress(db, concurrency=4, record_run=False)
    except CompressBusy:
        return {"busy": 1}
    if report.failed:
        log.warning("compress left %d periods for the next run", report.failed, extra={"action": "compress_failed"})
    return {**{k: v for k, v in report.counts.items() if v}, "sessions": report.sources,
            "model_calls": len(report.call_tokens), "input_tokens": sum(report.call_tokens)}


def rebuild_period(
    db: Database, tenant_id: str, user_id: str, period_start: dt.date, period_end: dt.date, *,
    compressor: Compressor | None = None, embedder: Embedder | None = None, force: bool = False,
) -> str:
    """Bring one compressed period up to date after its sources changed (e.g. one was erased).

    Pass the super's own ``period_start`` / ``period_end``. Returns what happened: ``rebuilt`` (from
    the remaining sources; an old super whose source was deleted is deleted, not kept as
    superseded), ``removed`` (fewer than two sources remain: the super is deleted and the remaining
    source is back in recall), ``unchanged``, ``uncompressed`` (the period has no super: nothing to
    rebuild), ``changed`` (a concurrent writer got there first; call again) or ``failed``.
    Superseded supers of the period that held a deleted source are deleted in any case. ``force``
    rebuilds an up-to-date super too. The model is only called when a super is rebuilt.
    """
    period = Period(period_start, period_end)
    lazy = _Lazy(db.settings, compressor, embedder)
    try:
        result = process_group(db, tenant_id, user_id, period, compressor=lazy.compressor, embedder=lazy.embedder,
                               force=force, only_compressed=True)
    finally:
        lazy.close()
    scope = _scope(tenant_id, user_id, period)
    with db.tenant(tenant_id) as conn:  # audit copies that held an erased source go too
        _lock_user(conn, scope)
        doomed = _damaged_history(conn, scope)
        if doomed:
            conn.execute(_q("compress_delete_supers"), {"ids": doomed})
    return "uncompressed" if result.outcome == "single" else result.outcome
