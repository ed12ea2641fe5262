"""The Anthropic client and what a model call costs (the prices: :mod:`jobs.llm.prices`).

The official SDK retries rate limits, overloads and 5xx itself (``max_retries``, honouring
``retry-after``); its base URL is configurable, so tests and benchmarks point it at a local fake.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jobs.config import Settings
from jobs.errors import ConfigError
from jobs.llm.prices import cost
from jobs.models import ModelCall

if TYPE_CHECKING:  # imported when a client is made: the SDK takes over a second to import, and most
    import anthropic  # commands (and the Claude Code hooks) never call the model


def make_client(settings: Settings) -> anthropic.Anthropic:
    if not settings.anthropic_api_key:
        raise ConfigError("The anthropic extractor needs ANTHROPIC_API_KEY (or use --extractor offline).")
    import anthropic

    return anthropic.Anthropic(
        api_key=settings.anthropic_api_key,
        base_url=settings.anthropic_base_url,
        max_retries=settings.max_retries,
        timeout=settings.model_timeout_s,
    )


def cost_usd(settings: Settings, call: ModelCall) -> float:
    """The call's estimated cost at its model's prices (jobs.llm.prices); a call that names no model
    (a plan's estimate) is priced as the configured one."""
    return cost(
        call.model or settings.model,
        input_tokens=call.input_tokens,
        output_tokens=call.output_tokens,
        cache_write_tokens=call.cache_write_tokens,
        cache_read_tokens=call.cache_read_tokens,
        batch=call.batch,
    )


def usage_call(
    settings: Settings, response: Any, *, template: str, prompt_hash: str, batch: bool = False, latency_ms: int = 0
) -> ModelCall:
    """A ModelCall row from an answer's usage block, with its estimated cost."""
    call = ModelCall(
        template=template, prompt_hash=prompt_hash, model=response.model, batch=batch, latency_ms=latency_ms
    )
    fill_usage(settings, call, response.usage)
    return call


def fill_usage(settings: Settings, call: ModelCall, usage: Any) -> None:
    """Copy token counts from an API usage block onto ``call`` and price it."""
    call.input_tokens = usage.input_tokens or 0
    call.output_tokens = usage.output_tokens or 0
    call.cache_read_tokens = getattr(usage, "cache_read_input_tokens", None) or 0
    call.cache_write_tokens = getattr(usage, "cache_creation_input_tokens", None) or 0
    call.cost_usd = cost_usd(settings, call)
