"""The built-in compressors, as the ``episodes.compressors`` entry points in pyproject.toml name them.

Each is a callable ``(settings, embedder | None) -> Compressor`` (:mod:`jobs.registry`), importing
its module at its first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobs.config import Settings
from jobs.embeddings import Embedder

if TYPE_CHECKING:
    from jobs.compress.claude import AnthropicCompressor
    from jobs.compress.claude_code import ClaudeCodeCompressor
    from jobs.compress.offline import OfflineCompressor


def anthropic(settings: Settings, embedder: Embedder | None = None) -> AnthropicCompressor:
    """Claude through the anthropic SDK (ANTHROPIC_API_KEY, EPISODES_MODEL)."""
    from jobs.compress.claude import AnthropicCompressor

    return AnthropicCompressor(settings)


def offline(settings: Settings, embedder: Embedder | None = None) -> OfflineCompressor:
    """The deterministic merge, no network (labelled ``offline``)."""
    from jobs.compress.offline import OfflineCompressor

    return OfflineCompressor(embedder, settings)


def claude_code(settings: Settings, embedder: Embedder | None = None) -> ClaudeCodeCompressor:
    """The `claude` CLI on PATH with the user's own login (opt-in: it spends their subscription)."""
    from jobs.compress.claude_code import ClaudeCodeCompressor

    return ClaudeCodeCompressor(settings)
