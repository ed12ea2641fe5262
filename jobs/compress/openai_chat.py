"""Any OpenAI Chat Completions endpoint as the compressor (``episodes compress --extractor openai``).

The Claude compressor's prompts, packing, reduction and grounding
(:class:`~jobs.compress.claude.AnthropicCompressor`) with the Chat Completions caller
(:class:`jobs.llm.openai_chat.ChatCaller`), as the extractor of the same name does; its supers and
calls are labelled ``openai:<model>``.
"""

from __future__ import annotations

from jobs.compress.claude import AnthropicCompressor
from jobs.config import Settings
from jobs.embeddings import Embedder
from jobs.llm.openai_chat import ChatCaller
from jobs.llm.spend import OPENAI, label


def make(settings: Settings, embedder: Embedder | None = None) -> AnthropicCompressor:
    """The ``openai`` entry point of ``episodes.compressors``."""
    compressor = AnthropicCompressor(settings, ChatCaller(settings))
    compressor.name = label(OPENAI, settings.model)
    return compressor
