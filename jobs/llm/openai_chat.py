"""Any OpenAI Chat Completions endpoint through the official ``openai`` SDK: Ollama, vLLM, llama.cpp's
server, LM Studio, or OpenAI's own API (docs/openai-compatible.md).

The request is the one every back end renders (:class:`jobs.llm.tools.ToolPrompt`: system text, user
text, the output's JSON schema); how the answer is asked for is ``EPISODES_OPENAI_MODE``:

- ``json_schema``: ``response_format={"type": "json_schema", ...}``, the schema enforced by the server
  where it can (vLLM's and llama.cpp's grammars, Ollama's ``format``, OpenAI's structured outputs);
- ``tools``: one function offered and forced (``tool_choice``), its arguments are the answer;
- ``json_object``: JSON mode, the schema stated in the system text;
- ``auto`` (default): ``json_schema``, and on a 400 that says the server does not support it, ``tools``,
  then ``json_object``; the first that works is kept for the rest of the process.

Whatever the mode, the answer is validated by the same pydantic model and the same repair-once rule
(:class:`jobs.llm.repair.RepairingCaller`) as the anthropic path. The SDK retries 408, 409, 429 and
5xx itself (``max_retries``, honouring ``retry-after``); what is left becomes one line: the server
is down, a timeout, a rate limit, a rejected key, a model the server does not have, a body that is no
chat completion, a redirect to another origin. The client, the model-name check and those reasons are
:mod:`jobs.llm.openai_wire`'s.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from jobs.config import Settings
from jobs.errors import ConfigError, ExtractionError, TransientModelError
from jobs.llm.openai_wire import (
    REDIRECTS,
    ServerUnreachable,
    excerpt,
    make_openai_client,
    redirect_refused,
    require_model,
    unreadable,
)
from jobs.llm.repair import (
    REPAIR_MAX_TOKENS,
    Problem,
    RepairingCaller,
    ToolRequest,
    recorded,
    refusal_note,
    short,
    truncated_note,
    validate,
)
from jobs.llm.spend import OPENAI, label, record_usage
from jobs.logs import hide_secrets
from jobs.models import ModelCall
from jobs.tokens import estimate_tokens

if TYPE_CHECKING:  # imported when a client is made: most commands never call a model
    import openai

log = logging.getLogger(__name__)

T = TypeVar("T", bound=BaseModel)

MODES = ("json_schema", "tools", "json_object")
"""How the answer is asked for, best first: ``auto`` walks down this list."""

# A 400 (or 422, 501) whose text says the server cannot do what the request asks: try the next mode.
_UNSUPPORTED = re.compile(
    r"response_format|json_schema|json_object|tool|function|not supported|unsupported|"
    r"not implemented|jinja|grammar",
    re.IGNORECASE,
)
# Some servers answer 500 instead (older llama.cpp builds: 'response_format type must be one of "text" or
# "json_object", but got: json_schema'); after the SDK's retries, only a text that names the feature counts.
_UNSUPPORTED_500 = re.compile(r"response_format|json_schema|not supported|unsupported|jinja", re.IGNORECASE)


class ChatCaller(RepairingCaller):
    """Chat Completions with structured output, validated into a pydantic object (one repair)."""

    def __init__(self, settings: Settings, client: openai.OpenAI | None = None) -> None:
        require_model(settings)
        self.settings = settings
        self.client = client or make_openai_client(settings)
        self.base_url = hide_secrets(str(self.client.base_url).rstrip("/"))  # shown in errors: no password
        self._modes = list(MODES) if settings.openai_mode == "auto" else [settings.openai_mode]
        self._lock = threading.Lock()
        self._completion_tokens = False  # send max_completion_tokens: OpenAI's reasoning models refuse max_tokens

    @property
    def label(self) -> str:
        """What episodes record as their model: ``openai:<EPISODES_MODEL>`` (:func:`jobs.llm.spend.label`)."""
        return label(OPENAI, self.settings.model)

    @property
    def mode(self) -> str:
        """The mode requests use now (``auto`` settles on the first the server accepts)."""
        with self._lock:
            return self._modes[0]

    def close(self) -> None:
        self.client.close()

    # --- the request ------------------------------------------------------------------------

    def request(self, prompt: ToolRequest) -> dict[str, Any]:
        return self._params(prompt, self.mode)

    def _params(self, prompt: ToolRequest, mode: str) -> dict[str, Any]:
        system = prompt.system + "\n\n" + _answer_rule(prompt, mode)
        params: dict[str, Any] = {
            "model": self.settings.model,
            "max_tokens": self.settings.max_output_tokens,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": prompt.user}],
        }
        if mode == "json_schema":
            params["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": prompt.tool_name,
                    "description": prompt.tool_description,
                    "schema": prompt.schema,
                },
            }
        elif mode == "tools":
            params["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": prompt.tool_name,
                        "description": prompt.tool_description,
                        "parameters": prompt.schema,
                    },
                }
            ]
            params["tool_choice"] = {"type": "function", "function": {"name": prompt.tool_name}}
        else:
            params["response_format"] = {"type": "json_object"}
        return params

    def send(self, prompt: ToolRequest, params: dict[str, Any], calls: list[ModelCall]) -> Any:
        """One request; in ``auto`` mode a 400 saying the mode is unsupported moves to the next mode."""
        while True:
            try:
                return self._send_once(prompt, params, calls)
            except _Unsupported as exc:
                if exc.completion_tokens:
                    self._completion_tokens = True
                    continue
                params = self._next_mode(prompt, params, exc)

    def _next_mode(self, prompt: ToolRequest, params: dict[str, Any], exc: _Unsupported) -> dict[str, Any]:
        tried = _mode_of(params)
        with self._lock:
            if self._modes[0] == tried and len(self._modes) > 1:
                self._modes.pop(0)
            now = self._modes[0]
        if now == tried:
            raise exc.error
        log.warning(
            "the model server does not support %s output (%s); using %s",
            tried,
            exc.reason,
            now,
            extra={"action": "openai_mode_fallback", "from": tried, "to": now},
        )
        fresh = self._params(prompt, now)
        if params["messages"][1:] != fresh["messages"][1:]:  # a repair request: keep its conversation
            fresh["messages"] = [fresh["messages"][0], *params["messages"][1:]]
            fresh["max_tokens"] = params["max_tokens"]
        return fresh

    def _send_once(self, prompt: ToolRequest, params: dict[str, Any], calls: list[ModelCall]) -> Any:
        import openai

        with recorded(prompt, label(OPENAI, params["model"]), calls) as call:
            try:
                sent = dict(params)
                if self._completion_tokens:
                    sent["max_completion_tokens"] = sent.pop("max_tokens")
                raw = self.client.chat.completions.with_raw_response.create(**sent)
                response, reason = _parsed(raw)
            except openai.OpenAIError as exc:
                raise self._failure(exc, call, params, calls) from exc
        if reason is not None:  # a 200 that is no chat completion: a proxy's page, another service
            call.outcome, call.error = "transient", f"unreadable response: {reason}"
            raise TransientModelError(f"unreadable response from {self.where}: {reason}", calls=calls)
        if getattr(response, "model", None):
            call.model = label(OPENAI, response.model)
        _record(call, params, response)
        return response

    @property
    def where(self) -> str:
        return f"the model server at {self.base_url}"

    def _failure(
        self, exc: openai.OpenAIError, call: ModelCall, params: dict[str, Any], calls: list[ModelCall]
    ) -> Exception:
        """The error to raise for a request that got no answer; ``call`` records why."""
        import httpx2
        import openai

        where, timeout = self.where, self.settings.model_timeout_s
        if isinstance(exc, openai.APITimeoutError):
            call.outcome, call.error = "transient", f"timeout after {timeout:g}s"
            return TransientModelError(
                f"{where} did not answer within {timeout:g}s (timeout, after retries)", calls=calls
            )
        if isinstance(exc, openai.APIConnectionError):
            cause = _said(exc.__cause__ or exc)
            call.outcome, call.error = "transient", f"cannot connect: {cause}"
            if isinstance(exc.__cause__, httpx2.ConnectError):  # refused, no such host: not the session's fault
                return ServerUnreachable(
                    f"cannot reach {where} ({cause}): is it running? Start it, or check OPENAI_BASE_URL. "
                    "The session was given back with no attempt counted."
                )
            return TransientModelError(
                f"cannot reach {where} ({cause}): is it running? Check OPENAI_BASE_URL", calls=calls
            )
        if isinstance(exc, openai.APIStatusError):
            call.outcome, call.error = "error", _said(exc)
            return self._status_failure(exc, params, calls)
        call.outcome, call.error = "transient", f"unreadable response: {_said(exc)}"  # a body that is no completion
        return TransientModelError(f"unreadable response from {where}: {_said(exc)}", calls=calls)

    def _status_failure(self, exc: openai.APIStatusError, params: dict[str, Any], calls: list[ModelCall]) -> Exception:
        import openai

        where, said, status = self.where, _said(exc), exc.status_code
        if status in REDIRECTS:
            return redirect_refused(where, exc)
        if isinstance(exc, (openai.AuthenticationError, openai.PermissionDeniedError)):
            return ConfigError(f"{where} rejected the key ({status}): {said}. Check OPENAI_API_KEY.")
        if isinstance(exc, openai.NotFoundError):
            return ConfigError(
                f"{where} answered 404 for model {params['model']!r}: {said}. Set EPISODES_MODEL to a model it "
                "serves, and check OPENAI_BASE_URL (it usually ends in /v1)."
            )
        if status == 400 and "max_completion_tokens" in str(exc) and not self._completion_tokens:
            return _Unsupported(said, ExtractionError(said, calls=calls), completion_tokens=True)
        unsupported = _UNSUPPORTED if status in (400, 422, 501) else _UNSUPPORTED_500 if status == 500 else None
        if (
            unsupported is not None
            and unsupported.search(str(exc))
            and _mode_of(params) != "json_object"
            and self.settings.openai_mode == "auto"
        ):
            return _Unsupported(said, ExtractionError(f"{where} rejected the request ({status}): {said}", calls=calls))
        if status >= 500 or status in (408, 409, 429):
            calls[-1].outcome = "transient"
            kind = "rate limited (429)" if status == 429 else f"error {status}"
            return TransientModelError(f"{where}: {kind} after retries: {said}", calls=calls)
        return ExtractionError(f"{where} rejected the request ({status}): {said}", calls=calls)

    # --- the answer -------------------------------------------------------------------------

    def read(self, response: Any, prompt: ToolRequest, output: type[T]) -> T | Problem:
        return parse_chat_output(response, prompt.tool_name, output)

    def repair(self, params: dict[str, Any], response: Any, problem: Problem) -> dict[str, Any]:
        outcome, reason = problem
        mode = _mode_of(params)
        how = f"Call the {params['tools'][0]['function']['name']} function" if mode == "tools" else "Answer"
        repaired = dict(params)
        first = params["messages"][:2]
        if outcome == "max_tokens":
            repaired["max_tokens"] = min(params["max_tokens"] * 2, REPAIR_MAX_TOKENS)
            repaired["messages"] = [
                first[0],
                {"role": "user", "content": first[1]["content"] + "\n\n" + truncated_note(how)},
            ]
            return repaired
        if outcome == "refusal":
            note = refusal_note("by calling the function" if mode == "tools" else "as one JSON object")
            repaired["messages"] = [first[0], {"role": "user", "content": first[1]["content"] + "\n\n" + note}]
            return repaired
        message = response.choices[0].message if response.choices else None
        tool_call = next(iter(getattr(message, "tool_calls", None) or []), None)
        if mode == "tools" and tool_call is not None:
            repaired["messages"] = [
                *first,
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": tool_call.id,
                            "type": "function",
                            "function": {"name": tool_call.function.name, "arguments": tool_call.function.arguments},
                        }
                    ],
                },
                {
                    "role": "tool",
                    "tool_call_id": tool_call.id,
                    "content": f"The arguments are invalid: {reason}. Call the function again with corrected arguments.",
                },
            ]
            return repaired
        said = (getattr(message, "content", None) or "").strip()
        fix = f"Your answer is unusable: {reason}. {how} again, with one corrected JSON object and nothing else."
        repaired["messages"] = (
            [*first, {"role": "assistant", "content": said}, {"role": "user", "content": fix}]
            if said
            else [first[0], {"role": "user", "content": first[1]["content"] + "\n\n" + fix}]
        )
        return repaired


class _Unsupported(Exception):
    """The server rejected the output mode (``auto`` tries the next); ``error``: what to raise when none is left."""

    def __init__(self, reason: str, error: ExtractionError, completion_tokens: bool = False) -> None:
        super().__init__(reason)
        self.reason, self.error = reason, error
        self.completion_tokens = completion_tokens  # the server wants max_completion_tokens instead of max_tokens


def _said(exc: BaseException) -> str:
    """An exception's text on one line (jobs.llm.repair.short), its secrets masked: a call's recorded error."""
    return hide_secrets(short(exc))


def _parsed(raw: Any) -> tuple[Any, str | None]:
    """The SDK's reading of a raw answer, and why it is no chat completion (None when it is one)."""
    try:
        parsed = raw.parse()
    except ValueError as exc:  # a JSON content type whose body does not parse
        kind = (raw.headers.get("content-type") or "no content type").split(";")[0].strip()
        return None, f"a body of type {kind} that does not parse ({_said(exc)}): {excerpt(raw.http_response.text)}"
    return parsed, unreadable(raw, parsed)


def _mode_of(params: dict[str, Any]) -> str:
    if "tools" in params:
        return "tools"
    return str(params["response_format"]["type"])


def _answer_rule(prompt: ToolRequest, mode: str) -> str:
    """The system text's last paragraph: how this request wants the answer (the templates name a tool)."""
    if mode == "tools":
        return f"Answer only by calling the `{prompt.tool_name}` function, once."
    rule = (
        f"Here `{prompt.tool_name}` is not a tool to call: answer with what its input would be, as one JSON "
        "object and nothing else (no prose, no code fence)."
    )
    if mode == "json_object":
        rule += " The object must match this JSON schema:\n" + json.dumps(prompt.schema, separators=(",", ":"))
    return rule


def _record(call: ModelCall, params: dict[str, Any], response: Any) -> None:
    """Tokens from the answer's usage (estimated from the text when a server sends none) and the cost."""
    usage = getattr(response, "usage", None)
    if usage is not None and (usage.prompt_tokens or usage.completion_tokens):
        details = getattr(usage, "prompt_tokens_details", None)
        cached = (getattr(details, "cached_tokens", None) or 0) if details is not None else 0
        record_usage(
            call,
            input_tokens=(usage.prompt_tokens or 0) - cached,
            output_tokens=usage.completion_tokens or 0,
            cache_read_tokens=cached,
        )
        return
    sent = sum(estimate_tokens(str(m.get("content") or "")) for m in params["messages"])
    answer = "".join(
        str(c.message.content or "") + "".join(t.function.arguments or "" for t in (c.message.tool_calls or []))
        for c in (response.choices or [])
    )
    record_usage(call, input_tokens=sent, output_tokens=estimate_tokens(answer))


def parse_chat_output(response: Any, name: str, output: type[T]) -> T | Problem:
    """The validated object in a Chat Completions answer (a tool call named ``name``, else the message
    text as JSON), or (outcome, reason) when it is unusable: refusal, max_tokens or invalid."""
    if not response.choices:
        return "invalid", "empty answer (no choices)"
    choice = response.choices[0]
    message = choice.message
    if getattr(message, "refusal", None) or choice.finish_reason == "content_filter":
        return "refusal", f"refused: {short(ValueError(message.refusal or 'content_filter'))}"
    if choice.finish_reason == "length":
        return "max_tokens", "the answer was cut off at max_tokens (finish_reason length)"
    tool_call = next(
        (t for t in (message.tool_calls or []) if getattr(t, "function", None) is not None and t.function.name == name),
        None,
    )
    text = tool_call.function.arguments if tool_call is not None else message.content
    if message.tool_calls and tool_call is None:
        return "invalid", f"no {name} function call in the answer"
    if not text or not text.strip():
        return "invalid", "empty answer"
    try:
        data = json.loads(text)
    except ValueError as exc:
        return "invalid", f"malformed JSON ({exc}); the answer began {excerpt(text)}"
    if not isinstance(data, dict):
        return "invalid", f"the answer is not a JSON object: {excerpt(text)}"
    return validate(data, output, "the answer")
