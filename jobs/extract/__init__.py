"""Extractors turn one transcript into one validated :class:`~jobs.models.EpisodeExtraction`.

Two implementations share the :class:`Extractor` protocol: :mod:`jobs.extract.claude` (Claude,
forced tool use) and :mod:`jobs.extract.offline` (deterministic, no network, lower quality,
labelled ``offline``). :func:`make_extractor` picks one from the settings.
"""

from __future__ import annotations

from typing import Protocol

from jobs.config import Settings
from jobs.embeddings import embedder_for
from jobs.errors import ConfigError
from jobs.models import ExtractionResult, OpenItem, Transcript


class Extractor(Protocol):
    """Turns a transcript into an episode. Raises ExtractionError / TransientModelError on failure."""

    name: str
    prompt_version: str

    def extract(self, transcript: Transcript, open_items: list[OpenItem] | None = None) -> ExtractionResult: ...

    def close(self) -> None:
        """Release what the extractor holds (an HTTP client); it is not used afterwards."""
        ...


def make_extractor(settings: Settings, name: str | None = None) -> Extractor:
    """The extractor by name: anthropic, offline, or auto (anthropic when a key is configured)."""
    chosen = name or settings.resolved_extractor
    if chosen == "auto":
        chosen = settings.resolved_extractor
    if chosen == "anthropic":
        from jobs.extract.claude import AnthropicExtractor

        return AnthropicExtractor(settings)
    if chosen == "offline":
        from jobs.extract.offline import OfflineExtractor

        return OfflineExtractor(embedder_for(settings))
    raise ConfigError(f"unknown extractor {chosen!r}; use anthropic or offline")


__all__ = ["Extractor", "make_extractor"]
