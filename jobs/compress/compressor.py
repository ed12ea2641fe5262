"""What a compressor reads (a period's source episodes) and returns (a :class:`Compression`), the
:class:`Compressor` protocol (:func:`jobs.compress.run.make_compressor` picks one).

Two implementations: :class:`~jobs.compress.model.ModelCompressor` (forced tool call through one
of three callers, the period summary validated by :class:`~jobs.compress.schema.PeriodSummary`, prompts
``compress_*.j2``) and :class:`~jobs.compress.offline.OfflineCompressor` (deterministic merge, no
network, labelled ``model='offline'``). Either way, the super carries *every* decision and every
question and commitment still open of its sources (:func:`jobs.compress.group.super_episode`):
the compressor only chooses and restates the highlights, so nothing is lost to the model's choice
or its output limit.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from jobs.compress.periods import Period
from jobs.models import Entity, ModelCall, episode_text


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
    """Turns a period's source episodes into one :class:`Compression`.

    Raises :class:`~jobs.errors.ModelError` (whose ``calls`` are recorded) when the model fails,
    :class:`~jobs.errors.ConfigError` when it cannot work at all (e.g. rejected credentials).
    """

    name: str
    prompt_version: str

    def compress(self, period: Period, sources: Sequence[SourceEpisode]) -> Compression: ...

    def close(self) -> None:
        """Release what the compressor holds (an HTTP client); it is not used afterwards."""
        ...
