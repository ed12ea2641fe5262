"""Any OpenAI Chat Completions endpoint as the extractor (``--extractor openai``): Ollama, vLLM,
llama.cpp's server, LM Studio, OpenAI's API (docs/openai-compatible.md).

It is the one :class:`~jobs.extract.model.ModelExtractor` (the templates and prompt version, the
split-and-reduce for long sessions) with the Chat Completions caller
(:class:`jobs.llm.openai_chat.ChatCaller`: the same pydantic validation and repair-once rule of
:class:`jobs.llm.repair.RepairingCaller`), and after it the same grounding and dead-letter rules of the
summarize job. Its episodes and calls are labelled ``openai:<model>`` (the caller's label). The Message
Batches methods are not for it: ``episodes run --batch`` always uses the anthropic back end.
"""

from __future__ import annotations

from jobs.config import Settings
from jobs.extract.model import ModelExtractor
from jobs.llm.openai_chat import ChatCaller


def OpenAIExtractor(settings: Settings, caller: ChatCaller | None = None) -> ModelExtractor:
    """Extract an episode through OPENAI_BASE_URL with EPISODES_MODEL (named like a class, as it was one)."""
    return ModelExtractor(settings, caller or ChatCaller(settings))


def make(settings: Settings) -> ModelExtractor:
    """The ``openai`` entry point of ``episodes.extractors``."""
    return OpenAIExtractor(settings)
