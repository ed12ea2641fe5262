"""Any OpenAI Chat Completions endpoint as the extractor (``--extractor openai``): Ollama, vLLM,
llama.cpp's server, LM Studio, OpenAI's API (docs/openai-compatible.md).

Everything but the wire is the Claude path's: the same templates and prompt version, the same
split-and-reduce for long sessions (:class:`~jobs.extract.claude.AnthropicExtractor`), the same
pydantic validation and repair-once rule (:class:`jobs.llm.repair.RepairingCaller`), and, after it,
the same grounding and dead-letter rules of the summarize job. Only the caller differs:
:class:`jobs.llm.openai_chat.ChatCaller`. Its episodes and calls are labelled ``openai:<model>``
(:func:`jobs.llm.spend.label`).
"""

from __future__ import annotations

from jobs.config import Settings
from jobs.extract.claude import AnthropicExtractor
from jobs.llm.openai_chat import ChatCaller
from jobs.llm.spend import OPENAI, label


class OpenAIExtractor(AnthropicExtractor):
    """Extract an episode through OPENAI_BASE_URL with EPISODES_MODEL. The Message Batches methods it
    inherits are not for it: ``episodes run --batch`` always uses the anthropic back end."""

    def __init__(self, settings: Settings, caller: ChatCaller | None = None) -> None:
        super().__init__(settings, caller or ChatCaller(settings))
        self.name = label(OPENAI, settings.model)


def make(settings: Settings) -> OpenAIExtractor:
    """The ``openai`` entry point of ``episodes.extractors``."""
    return OpenAIExtractor(settings)
