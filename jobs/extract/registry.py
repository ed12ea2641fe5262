"""The built-in extractors, as the ``episodes.extractors`` entry points in pyproject.toml name them.

Each is a callable ``(settings) -> Extractor`` (:mod:`jobs.registry`); each imports its module at
its first use, so choosing one back end never imports another's SDK. The model back ends are one
:class:`~jobs.extract.model.ModelExtractor` composed with a caller (the ``openai`` one:
:func:`jobs.extract.openai_chat.make`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobs.config import Settings
from jobs.embeddings import embedder_for

if TYPE_CHECKING:
    from jobs.extract.model import ModelExtractor
    from jobs.extract.offline import OfflineExtractor


def anthropic(settings: Settings) -> ModelExtractor:
    """Claude through the anthropic SDK (ANTHROPIC_API_KEY, EPISODES_MODEL)."""
    from jobs.extract.model import ModelExtractor
    from jobs.llm.tools import ToolCaller

    return ModelExtractor(settings, ToolCaller(settings))


def offline(settings: Settings) -> OfflineExtractor:
    """Deterministic, no network, lower quality (labelled ``offline``)."""
    from jobs.extract.offline import OfflineExtractor

    return OfflineExtractor(embedder_for(settings))


def claude_code(settings: Settings) -> ModelExtractor:
    """The `claude` CLI on PATH with the user's own login (opt-in: it spends their subscription)."""
    from jobs.extract.model import ModelExtractor
    from jobs.llm.claude_cli import ClaudeCli

    return ModelExtractor(settings, ClaudeCli(settings))
