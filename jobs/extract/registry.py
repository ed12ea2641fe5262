"""The built-in extractors, as the ``episodes.extractors`` entry points in pyproject.toml name them.

Each is a callable ``(settings) -> Extractor`` (:mod:`jobs.registry`); each imports its module at
its first use, so choosing one back end never imports another's SDK.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobs.config import Settings
from jobs.embeddings import embedder_for

if TYPE_CHECKING:
    from jobs.extract.claude import AnthropicExtractor
    from jobs.extract.claude_code import ClaudeCodeExtractor
    from jobs.extract.offline import OfflineExtractor


def anthropic(settings: Settings) -> AnthropicExtractor:
    """Claude through the anthropic SDK (ANTHROPIC_API_KEY, EPISODES_MODEL)."""
    from jobs.extract.claude import AnthropicExtractor

    return AnthropicExtractor(settings)


def offline(settings: Settings) -> OfflineExtractor:
    """Deterministic, no network, lower quality (labelled ``offline``)."""
    from jobs.extract.offline import OfflineExtractor

    return OfflineExtractor(embedder_for(settings))


def claude_code(settings: Settings) -> ClaudeCodeExtractor:
    """The `claude` CLI on PATH with the user's own login (opt-in: it spends their subscription)."""
    from jobs.extract.claude_code import ClaudeCodeExtractor

    return ClaudeCodeExtractor(settings)
