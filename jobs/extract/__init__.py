"""Extractors turn one transcript into one validated :class:`~jobs.models.EpisodeExtraction`.

Every extractor follows the :class:`Extractor` protocol and is registered by name in the
``episodes.extractors`` entry-point group (:mod:`jobs.registry`; the built-in ones are in
:mod:`jobs.extract.registry`): ``anthropic``, ``openai`` and ``claude-code`` (the one
:class:`~jobs.extract.model.ModelExtractor`, forced tool use, composed with each back end's caller) and
``offline`` (:mod:`jobs.extract.offline`: deterministic, no network, lower quality, labelled
``offline``). :func:`make_extractor` picks one by name, ``auto`` as
:attr:`jobs.config.Settings.resolved_extractor` decides.
"""

from __future__ import annotations

from typing import Protocol

from jobs.config import Settings
from jobs.models import ExtractionResult, OpenItem, Transcript
from jobs.registry import EXTRACTORS, load


class Extractor(Protocol):
    """Turns a transcript into an episode. Raises ExtractionError / TransientModelError on failure."""

    name: str
    prompt_version: str

    def extract(self, transcript: Transcript, open_items: list[OpenItem] | None = None) -> ExtractionResult: ...

    def close(self) -> None:
        """Release what the extractor holds (an HTTP client); it is not used afterwards."""
        ...


def make_extractor(settings: Settings, name: str | None = None) -> Extractor:
    """The extractor registered as ``name`` (None or ``auto``: as the settings resolve it)."""
    chosen = settings.resolved_extractor if name in (None, "", "auto") else name
    extractor: Extractor = load(EXTRACTORS, chosen, "extractor")(settings)
    return extractor


__all__ = ["Extractor", "make_extractor"]
