"""The built-in compressors, as the ``episodes.compressors`` entry points in pyproject.toml name them.

Each is a callable ``(settings, embedder | None) -> Compressor`` (:mod:`jobs.registry`), importing
its module at its first use. The model back ends are one :class:`~jobs.compress.model.ModelCompressor`
composed with a caller (the ``openai`` one: :func:`jobs.compress.openai_chat.make`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobs.config import Settings
from jobs.embeddings import Embedder

if TYPE_CHECKING:
    from jobs.compress.model import ModelCompressor
    from jobs.compress.offline import OfflineCompressor


def anthropic(settings: Settings, embedder: Embedder | None = None) -> ModelCompressor:
    """Claude through the anthropic SDK (ANTHROPIC_API_KEY, EPISODES_MODEL)."""
    from jobs.compress.model import ModelCompressor
    from jobs.llm.tools import ToolCaller

    return ModelCompressor(settings, ToolCaller(settings))


def offline(settings: Settings, embedder: Embedder | None = None) -> OfflineCompressor:
    """The deterministic merge, no network (labelled ``offline``)."""
    from jobs.compress.offline import OfflineCompressor

    return OfflineCompressor(embedder, settings)


def claude_code(settings: Settings, embedder: Embedder | None = None) -> ModelCompressor:
    """The `claude` CLI on PATH with the user's own login (opt-in: it spends their subscription)."""
    from jobs.compress.model import ModelCompressor
    from jobs.llm.claude_cli import ClaudeCli

    return ModelCompressor(settings, ClaudeCli(settings))
