"""Claude through the anthropic SDK as the compressor (``--extractor anthropic``): the one
:class:`~jobs.compress.model.ModelCompressor` with :class:`jobs.llm.tools.ToolCaller`, its default caller.

``AnthropicCompressor`` is that class under the name the compress job, the tests and the benchmarks
know; the prompt version and the block views are re-exported for them.
"""

from __future__ import annotations

from jobs.compress.model import (
    REDUCE_TEMPLATE,
    SESSIONS_TEMPLATE,
    SYSTEM_TEMPLATE,
    TOOL_NAME,
    ModelCompressor,
    _Block,
    _EventView,
    prompt_version,
)

AnthropicCompressor = ModelCompressor
"""``AnthropicCompressor(settings)``: Claude (EPISODES_MODEL) through the anthropic SDK."""

__all__ = [
    "REDUCE_TEMPLATE",
    "SESSIONS_TEMPLATE",
    "SYSTEM_TEMPLATE",
    "TOOL_NAME",
    "AnthropicCompressor",
    "ModelCompressor",
    "_Block",
    "_EventView",
    "prompt_version",
]
