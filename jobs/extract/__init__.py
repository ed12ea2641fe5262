"""Extractors turn one transcript into one validated :class:`~jobs.models.EpisodeExtraction`.

Two implementations share this interface: :mod:`jobs.extract.anthropic` (Claude, forced tool use)
and :mod:`jobs.extract.offline` (deterministic, no network, lower quality, labelled ``offline``).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Protocol

from jobs.models import EpisodeExtraction, Message


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
    """A still-open question or commitment from an earlier episode of the same user."""

    event_id: int
    type: str
    what: str
    since: dt.datetime


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


class Extractor(Protocol):
    """Turns a transcript into an episode. Raises ExtractionError / TransientModelError on failure."""

    name: str
    prompt_version: str

    def extract(self, transcript: Transcript, open_items: list[OpenItem] | None = None) -> ExtractionResult: ...


def estimate_tokens(text: str) -> int:
    """Rough token count used for budgets everywhere: characters / 4 (English prose ~ 4 chars a token)."""
    return (len(text) + 3) // 4
