"""The types every layer shares: the transcript input, the episode the model must emit, and the
domain records passed between jobs (a claimed transcript, an open item, a model call, an extraction).

The episode models double as the forced tool's input schema (``tool_input_schema()``): their field
descriptions are the extraction instructions the model reads, so edit them as prompt text. How their
text and timestamps are cleaned on the way in is :mod:`jobs.text_clean`'s.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from jobs.concepts import DEFAULT_PURPOSE, PURPOSE, PURPOSE_RULE, STANDING_TYPES, EntityKind, EventType
from jobs.formats.envelope import check_metadata, unknown_field
from jobs.formats.shapes import ShapeError, ShapeOptions, normalise_messages
from jobs.text_clean import aware, clean_text, shown_name, without_controls
from jobs.tokens import estimate_tokens as estimate_tokens  # re-exported: every budget counts tokens with it

_TENANT = re.compile(r"^[A-Za-z0-9_.:@-]{1,128}$")
MAX_OPEN_ITEMS = 20  # earlier open questions and commitments offered to an extractor per session
MAX_CURRENT_DECISIONS = 20  # the newest earlier current decisions and preferences offered to an extractor per session
# and, beside them, the older ones whose episode is closest to the session (an amendment of a rule stated long ago)
MAX_RELATED_DECISIONS = 10


class Message(BaseModel):
    """One chat message. ``ts`` and ``name`` are optional."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    role: Literal["user", "assistant", "system", "tool"]
    content: str
    ts: dt.datetime | None = None
    name: str | None = Field(default=None, max_length=200)

    @field_validator("content")
    @classmethod
    def _content(cls, value: str) -> str:
        return clean_text(value, "content")

    @field_validator("name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        return None if value is None else clean_text(value, "name")

    @field_validator("ts")
    @classmethod
    def _ts(cls, value: dt.datetime | None) -> dt.datetime | None:
        return aware(value, "ts")

    @property
    def speaker(self) -> str:
        """Who spoke, as lines, events and prompts quote it: the role, and the host's name for the speaker
        only as an attribute after it (``user (Caroline)``). A name never stands alone, so a user message
        named ``assistant``, ``system`` or ``assistant (tool call)`` stays ``user (...)`` (issue 46 #4)."""
        name = shown_name(self.name)
        if self.role == "tool" or not name or name.casefold() == self.role:
            return self.role
        return f"{self.role} ({name})"


class TranscriptIn(BaseModel):
    """A finished (or still open) chat session as a host application hands it over.

    ``messages`` may come in any accepted host shape (:mod:`jobs.formats.shapes`) and are held in the
    canonical form; validate with ``context={"shapes": ShapeOptions(...)}`` to set how tool output is
    condensed. An unknown field in the record itself is refused, naming the field it was likely
    meant to be (``endedAt`` -> ``ended_at``): a silently dropped ``ended_at`` leaves a session
    unsummarised. Free-form data goes under ``metadata`` (a bounded JSON object).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    tenant_id: str
    user_id: str = Field(min_length=1, max_length=256)
    session_id: str = Field(min_length=1, max_length=256)
    agent_id: str | None = Field(default=None, max_length=256)
    purpose: str = DEFAULT_PURPOSE
    started_at: dt.datetime | None = None
    ended_at: dt.datetime | None = None
    messages: list[Message] = Field(min_length=1)
    metadata: dict[str, Any] | None = None

    @model_validator(mode="before")
    @classmethod
    def _known_fields(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key in data:
                if key not in cls.model_fields:
                    raise ValueError(unknown_field(str(key), list(cls.model_fields)))
        return data

    @field_validator("messages", mode="before")
    @classmethod
    def _shapes(cls, value: Any, info: ValidationInfo) -> Any:
        if not isinstance(value, list) or not value:
            return value  # the list checks name the problem
        options = (info.context or {}).get("shapes") if isinstance(info.context, dict) else None
        try:
            canonical = normalise_messages(value, options if isinstance(options, ShapeOptions) else None)
        except ShapeError as exc:
            raise ValueError(str(exc)) from None
        if not canonical:
            raise ValueError("no message has any content (only thinking or empty blocks)")
        return canonical

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if value is None else check_metadata(value)

    @field_validator("tenant_id")
    @classmethod
    def _tenant(cls, value: str) -> str:
        if not _TENANT.match(value):
            raise ValueError("tenant_id must be 1-128 characters of letters, digits and _.:@-")
        return value

    @field_validator("purpose")
    @classmethod
    def _purpose(cls, value: str) -> str:
        if not PURPOSE.match(value):
            raise ValueError(f"purpose must be {PURPOSE_RULE}")
        return value

    @field_validator("user_id", "session_id", "agent_id")
    @classmethod
    def _ids(cls, value: str | None) -> str | None:
        return None if value is None else clean_text(value, "id")

    @field_validator("started_at", "ended_at")
    @classmethod
    def _times(cls, value: dt.datetime | None) -> dt.datetime | None:
        return aware(value, "timestamp")

    @model_validator(mode="after")
    def _order(self) -> TranscriptIn:
        if self.started_at and self.ended_at and self.ended_at < self.started_at:
            raise ValueError(f"ended_at {self.ended_at.isoformat()} is before started_at {self.started_at.isoformat()}")
        return self

    def content_hash(self) -> str:
        """Identity of the content: identical re-ingestion is a no-op, any change re-summarises."""
        payload = self.model_dump(mode="json", exclude={"tenant_id", "session_id"})
        if payload.get("metadata") is None:
            payload.pop("metadata", None)  # records without metadata keep the hash they always had
        return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


# ------------------------------------------------------------------------------------------------
# What the model emits. Field descriptions are instructions.
# ------------------------------------------------------------------------------------------------


class KeyEvent(BaseModel):
    """A typed key event, grounded in the messages that state it."""

    type: EventType = Field(
        description=(
            "decision: something the user decided or agreed to (a choice between options, a plan adopted, a design "
            "or code change chosen). "
            "open_question: a question raised in the session and NOT answered by its end, or a TODO left open. "
            "commitment: something someone promised to do after the session (who must be named), often with a due "
            'date; an agent\'s working steps within the session ("let me check", "I\'ll run the tests") are not. '
            "surprise: something unexpected the user noticed or reacted to, such as a failing test or an error. "
            'preference: a lasting like, dislike or way the user wants things done ("I prefer metric units"). '
            "fact: a specific the user states about themselves, their people, project or setup that a later session "
            'may ask about ("the billing service runs PostgreSQL 15", "my sister lives in Oslo"), with its '
            "numbers, versions, names and dates verbatim."
        )
    )
    what: str = Field(
        min_length=3,
        max_length=400,
        description=(
            "One self-contained sentence in the third person with the concrete details copied verbatim "
            '(names, amounts, versions, dates, files, identifiers, settings: "decided to use PostgreSQL 17 for the '
            'billing service", never "decided on a database"), understandable without the transcript. Never '
            "tool output quoted as someone's words."
        ),
    )
    evidence: list[int] = Field(
        min_length=1,
        max_length=12,
        description="Indexes [n] of the transcript messages that state this event. Only indexes that exist.",
    )
    who: str = Field(
        min_length=1,
        max_length=100,
        description="Who decided, asked or committed: the speaker's name if known, else 'user' or 'assistant'.",
    )
    due: dt.date | None = Field(
        default=None,
        description="Commitments only: the due date as YYYY-MM-DD, resolved against the session date; else null.",
    )
    replaces: int | None = Field(
        default=None,
        description=(
            "Decisions and preferences only: the id of the item in <current_decisions> that this one replaces, "
            "when the user clearly changed that earlier decision or preference in this session (the later one "
            'wins); the evidence must show the change, and `what` says what changed ("switched from X to Y"). '
            "Only ids listed there; else null."
        ),
    )

    @field_validator("what", "who")
    @classmethod
    def _plain(cls, value: str) -> str:
        return without_controls(value)


class Entity(BaseModel):
    """A named thing mentioned in the transcript."""

    name: str = Field(min_length=1, max_length=120, description="The name exactly as written in the transcript.")
    kind: EntityKind = Field(description="person, org, product, project, place or other.")


class Resolution(BaseModel):
    """An earlier open question answered, or commitment fulfilled, in this session."""

    item_id: int = Field(description="The id of the item in <open_items>. Only ids listed there.")
    outcome: Literal["answered", "fulfilled"] = Field(
        description="answered: the open question got its answer; fulfilled: the commitment was done."
    )
    evidence: list[int] = Field(
        min_length=1, max_length=6, description="Indexes [n] of the messages in this session that show it."
    )


class EpisodeExtraction(BaseModel):
    """One episode: what happened in the session, for an agent that meets this user again later."""

    summary: str = Field(
        min_length=10,
        max_length=1200,
        description=(
            "1-3 sentences, at most 200 tokens, third person, past tense: what the user wanted, what happened, "
            "how it ended. Name people and things; no filler, no speculation beyond the transcript."
        ),
    )
    topic_tags: list[str] = Field(
        max_length=5,
        description=(
            "Up to 5 short lowercase topic tags (1-3 words each), most important first; what the session "
            "was about, never format words such as tool, result, user, assistant, call, output or json."
        ),
    )
    key_events: list[KeyEvent] = Field(
        default_factory=list,
        max_length=20,
        description="The session's decisions, open questions, commitments and surprises. Empty if none.",
    )
    entities: list[Entity] = Field(
        default_factory=list,
        max_length=30,
        description=(
            "People, organisations, products, projects and places mentioned by name, and the files, "
            "commands and services named in the session."
        ),
    )
    resolved_items: list[Resolution] = Field(
        default_factory=list,
        max_length=20,
        description="Items from <open_items> (if any) that this session clearly answered or fulfilled. Else empty.",
    )
    importance: float = Field(
        ge=0.0,
        le=1.0,
        description=(
            "How much this session matters for future sessions with this user: 0.1 small talk, "
            "0.5 routine work, 0.8+ decisions, commitments or life events."
        ),
    )

    @field_validator("summary")
    @classmethod
    def _plain_summary(cls, value: str) -> str:
        return without_controls(value)

    @field_validator("topic_tags")
    @classmethod
    def _tags(cls, tags: list[str]) -> list[str]:
        seen: list[str] = []
        for tag in tags:
            clean = " ".join(tag.strip().lower().split())
            if not clean:
                raise ValueError("topic tags must not be empty")
            if len(clean) > 40:
                raise ValueError(f"topic tag {clean[:40]!r}... is longer than 40 characters")
            if clean not in seen:
                seen.append(clean)
        return seen


def tool_input_schema(model: type[BaseModel] = EpisodeExtraction) -> dict[str, Any]:
    """The JSON schema of ``model`` with every ``$ref`` inlined (tool schemas stay self-contained)."""
    schema = model.model_json_schema()
    defs = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                name = node["$ref"].rsplit("/", 1)[-1]
                merged = {**inline(defs[name]), **{k: v for k, v in node.items() if k != "$ref"}}
                return merged
            return {k: inline(v) for k, v in node.items()}
        if isinstance(node, list):
            return [inline(v) for v in node]
        return node

    return dict(inline(schema))  # the schema with every $ref replaced: a dict still


# ------------------------------------------------------------------------------------------------
# Domain records passed between the jobs.
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Transcript:
    """A claimed transcript, as the extractors see it. Message indexes are list positions."""

    id: int
    tenant_id: str
    user_id: str
    session_id: str
    purpose: str
    started_at: dt.datetime | None
    ended_at: dt.datetime
    messages: list[Message]
    content_hash: str = ""
    agent_id: str | None = None
    attempts: int = 0


@dataclass(frozen=True)
class OpenItem:
    """An earlier item of the same user offered to an extractor: a still-open question or
    commitment (``type`` in OPEN_ITEM_TYPES), or a current decision or preference (STANDING_TYPES)."""

    event_id: int
    type: EventType
    what: str
    since: dt.datetime

    @property
    def standing(self) -> bool:
        """A decision or preference: a later one may replace it; it is never resolved."""
        return self.type in STANDING_TYPES


def split_offered(items: Sequence[OpenItem] | None) -> tuple[list[OpenItem], list[OpenItem]]:
    """The open items (at most MAX_OPEN_ITEMS) and the current decisions and preferences (at most
    MAX_CURRENT_DECISIONS newest plus MAX_RELATED_DECISIONS related) among ``items``, each in the given order."""
    items = items or []
    return (
        [i for i in items if not i.standing][:MAX_OPEN_ITEMS],
        [i for i in items if i.standing][: MAX_CURRENT_DECISIONS + MAX_RELATED_DECISIONS],
    )


@dataclass
class ModelCall:
    """One call to the model, as recorded in model_calls."""

    template: str
    prompt_hash: str
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    latency_ms: int = 0
    outcome: str = "ok"
    error: str | None = None
    cost_usd: float = 0.0
    batch: bool = False


@dataclass
class ExtractionResult:
    extraction: EpisodeExtraction
    model: str
    prompt_version: str
    calls: list[ModelCall] = field(default_factory=list)

    @property
    def input_tokens(self) -> int:
        return sum(c.input_tokens for c in self.calls)

    @property
    def output_tokens(self) -> int:
        return sum(c.output_tokens for c in self.calls)

    @property
    def cache_read_tokens(self) -> int:
        return sum(c.cache_read_tokens for c in self.calls)

    @property
    def cache_write_tokens(self) -> int:
        return sum(c.cache_write_tokens for c in self.calls)

    @property
    def cost_usd(self) -> float:
        return sum(c.cost_usd for c in self.calls)


def episode_text(summary: str, topic_tags: Sequence[str], events: Sequence[str], entities: Sequence[str]) -> str:
    """The text embedded (and full-text indexed) for an episode: the summary, then the topic tags,
    then each key event's sentence, then entity names."""
    parts = [summary.strip()]
    if topic_tags:
        parts.append("Topics: " + ", ".join(topic_tags) + ".")
    parts.extend(e.strip() for e in events if e.strip())
    if entities:
        parts.append("Mentions: " + ", ".join(entities) + ".")
    return "\n".join(parts)


def search_text(episode: EpisodeExtraction) -> str:
    """The text embedded and full-text indexed for an extracted episode."""
    return episode_text(
        episode.summary, episode.topic_tags, [e.what for e in episode.key_events], [e.name for e in episode.entities]
    )
