"""Claude through the anthropic SDK as the extractor (``--extractor anthropic``): the one
:class:`~jobs.extract.model.ModelExtractor` with :class:`jobs.llm.tools.ToolCaller`, its default caller.

``AnthropicExtractor`` is that class under the name the summarize job, the Message Batches path, the
CLI, the tests and the benchmarks know; the templates and the prompt version are re-exported for them.
"""

from __future__ import annotations

from jobs.extract.model import (
    REDUCE_TEMPLATE,
    SYSTEM_TEMPLATE,
    TOOL_NAME,
    USER_TEMPLATE,
    BatchRequest,
    ModelExtractor,
    prompt_version,
)

AnthropicExtractor = ModelExtractor
"""``AnthropicExtractor(settings)``: Claude (EPISODES_MODEL) through the anthropic SDK."""

__all__ = [
    "REDUCE_TEMPLATE",
    "SYSTEM_TEMPLATE",
    "TOOL_NAME",
    "USER_TEMPLATE",
    "AnthropicExtractor",
    "BatchRequest",
    "ModelExtractor",
    "prompt_version",
]
