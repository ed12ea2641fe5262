"""Forced tool calls to Claude through the official SDK, validated into a pydantic model.

One code path for every model call (extraction, reduction, compression): the fixed part of the
prompt (tool schema + system text) is marked for prompt caching; the output must arrive as the
forced tool's input and validate against the pydantic model. On invalid input or a truncated
answer (``max_tokens``) one repair request is made, quoting the validation errors; then it fails
(the rule is :class:`jobs.llm.repair.RepairingCaller`'s, shared with the other back ends).
A refusal fails at once. Every failure raises a :class:`~jobs.errors.ModelError` whose ``calls``
hold the calls made so far, failed ones included. Transient failures (429, 529, 5xx, timeouts, connection errors) are
retried by the SDK itself (``max_retries``, honouring ``retry-after``) and then surface as
:class:`TransientModelError`, which the job retries later with backoff.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from jobs.config import Settings
from jobs.errors import ConfigError, ExtractionError, TransientModelError
from jobs.llm.client import fill_usage, make_client
from jobs.llm.prices import model_id
from jobs.llm.repair import (
    REPAIR_MAX_TOKENS,
    Problem,
    RepairingCaller,
    recorded,
    refusal_note,
    short,
    truncated_note,
    validate,
)
from jobs.llm.spend import ANTHROPIC, label
from jobs.models import ModelCall
from jobs.prompts import fingerprint

if TYPE_CHECKING:
    import anthropic

log = logging.getLogger(__name__)

T = TypeVar("T", bound=BaseModel)

# Models that answer 400 to a forced tool choice (their migration guides, checked 2026-11-26). They are
# offered the tool with "auto" and asked to call it; an answer without the call gets the repair request.
NO_FORCED_TOOL_CHOICE = frozenset({"claude-opus-5-5", "claude-sonnet-5-5"})


@dataclass(frozen=True)
class ToolPrompt:
    """A rendered request: the cached fixed part (system, tool) and the variable user text."""

    template: str
    system: str
    user: str
    tool_name: str
    tool_description: str
    schema: dict[str, Any]

    @property
    def prompt_hash(self) -> str:
        return fingerprint(self.system, json.dumps(self.schema, sort_keys=True), self.user)

    def tool(self) -> dict[str, Any]:
        return {"name": self.tool_name, "description": self.tool_description, "input_schema": self.schema}

    def request(self, model: str, max_tokens: int) -> dict[str, Any]:
        """Keyword arguments for ``messages.create`` (also the params of a batch request). The tool is
        forced where the model accepts that; elsewhere it is offered and the request asks for it."""
        forced = model_id(model) not in NO_FORCED_TOOL_CHOICE
        return {
            "model": model,
            "max_tokens": max_tokens,
            "system": [{"type": "text", "text": self.system, "cache_control": {"type": "ephemeral"}}],
            "tools": [self.tool()],
            "tool_choice": {"type": "tool", "name": self.tool_name} if forced else {"type": "auto"},
            "messages": [
                {
                    "role": "user",
                    "content": self.user
                    if forced
                    else f"{self.user}\n\nAnswer only by calling the {self.tool_name} tool, once.",
                }
            ],
        }


class ToolCaller(RepairingCaller):
    """Calls the model with a forced tool and returns a validated pydantic object."""

    def __init__(self, settings: Settings, client: anthropic.Anthropic | None = None) -> None:
        self.settings = settings
        self.client = client or make_client(settings)

    @property
    def label(self) -> str:
        """The bare model id (EPISODES_MODEL): the anthropic back end's label (:func:`jobs.llm.spend.label`)."""
        return label(ANTHROPIC, self.settings.model)

    def close(self) -> None:
        self.client.close()

    def request(self, prompt: ToolPrompt) -> dict[str, Any]:
        return prompt.request(self.settings.model, self.settings.max_output_tokens)

    def send(self, prompt: ToolPrompt, params: dict[str, Any], calls: list[ModelCall]) -> Any:
        import anthropic  # loaded by make_client already; not at module import (jobs.llm.client)

        with recorded(prompt, params["model"], calls) as call:
            try:
                response = self.client.messages.create(**params)
            except (anthropic.AuthenticationError, anthropic.PermissionDeniedError) as exc:
                call.outcome, call.error = "error", short(exc)
                raise ConfigError(
                    f"The model API rejected the credentials: {short(exc)}. Check ANTHROPIC_API_KEY."
                ) from exc
            except (anthropic.RateLimitError, anthropic.InternalServerError, anthropic.APIConnectionError) as exc:
                call.outcome, call.error = "transient", short(exc)
                raise TransientModelError(
                    f"model service unavailable after retries: {short(exc)}", calls=calls
                ) from exc
            except anthropic.APIStatusError as exc:
                transient = exc.status_code >= 500 or exc.status_code in (408, 409, 429)
                call.outcome, call.error = ("transient" if transient else "error"), short(exc)
                if transient:
                    raise TransientModelError(
                        f"model service error {exc.status_code}: {short(exc)}", calls=calls
                    ) from exc
                raise ExtractionError(
                    f"the model API rejected the request ({exc.status_code}): {short(exc)}", calls=calls
                ) from exc
            except ValueError as exc:  # an unparseable response body
                call.outcome, call.error = "transient", f"unreadable response: {exc}"
                raise TransientModelError(f"unreadable response from the model service: {exc}", calls=calls) from exc
        fill_usage(self.settings, call, response.usage)
        log.debug(
            "model call",
            extra={
                "action": "model_call",
                "template": prompt.template,
                "latency_ms": call.latency_ms,
                "stop_reason": response.stop_reason,
                "input_tokens": call.input_tokens,
            },
        )
        return response

    def read(self, response: Any, prompt: ToolPrompt, output: type[T]) -> T | Problem:
        return parse_tool_output(response, prompt.tool_name, output)

    def repair(self, params: dict[str, Any], response: Any, problem: Problem) -> dict[str, Any]:
        outcome, reason = problem
        repaired = dict(params)
        if outcome == "max_tokens":
            repaired["max_tokens"] = min(params["max_tokens"] * 2, REPAIR_MAX_TOKENS)
            note = truncated_note("Call the tool")
            repaired["messages"] = [{"role": "user", "content": params["messages"][0]["content"] + "\n\n" + note}]
            return repaired
        if outcome == "refusal":
            note = refusal_note("by calling the tool")
            repaired["messages"] = [{"role": "user", "content": params["messages"][0]["content"] + "\n\n" + note}]
            return repaired
        block = next((b for b in response.content if getattr(b, "type", None) == "tool_use"), None)
        if block is None:
            note = f"You must call the {params['tools'][0]['name']} tool. Problem: {reason}"
            repaired["messages"] = [{"role": "user", "content": params["messages"][0]["content"] + "\n\n" + note}]
            return repaired
        repaired["messages"] = [
            params["messages"][0],
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": block.id,
                        "name": block.name,
                        "input": block.input if isinstance(block.input, dict) else {},
                    }
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": block.id,
                        "is_error": True,
                        "content": f"The tool input is invalid: {reason}. Call the tool again with corrected input.",
                    },
                ],
            },
        ]
        return repaired


def parse_tool_output(response: Any, tool_name: str, output: type[T]) -> T | Problem:
    """The validated object from a Messages API answer, or (outcome, reason) when it is unusable."""
    if response.stop_reason == "refusal":
        return "refusal", "stop_reason refusal"
    if response.stop_reason == "max_tokens":
        return "max_tokens", "the answer was cut off at max_tokens"
    block = next((b for b in response.content if getattr(b, "type", None) == "tool_use" and b.name == tool_name), None)
    if block is None:
        return "invalid", f"no {tool_name} tool call in the answer"
    if not isinstance(block.input, dict):
        return "invalid", "tool input is not a JSON object"
    return validate(block.input, output, "tool input")
