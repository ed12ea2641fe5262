"""Any OpenAI Chat Completions endpoint as the compressor (``episodes compress --extractor openai``).

The one :class:`~jobs.compress.model.ModelCompressor` (prompts, packing, reduction and grounding) with
the Chat Completions caller (:class:`jobs.llm.openai_chat.ChatCaller`), as the extractor of the same name
is; its supers and calls are labelled ``openai:<model>`` (the caller's label).
"""

from __future__ import annotations

from jobs.compress.model import ModelCompressor
from jobs.config import Settings
from jobs.embeddings import Embedder
from jobs.llm.openai_chat import ChatCaller


def make(settings: Settings, embedder: Embedder | None = None) -> ModelCompressor:
    """The ``openai`` entry point of ``episodes.compressors``."""
    return ModelCompressor(settings, ChatCaller(settings))
