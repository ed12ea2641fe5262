"""What tests/support/fake_anthropic.py answers with and records: a scripted answer (`Step`, built by `tool_use`,
`text`, `refusal`, `max_tokens`, `error`, `rate_limited`, `overloaded`, `server_error`, `hang`, `raw`), a recorded
request (`Recorded`), the default and echo responders, and the wire's small parts (errors in Anthropic's shape,
request checks, prompt-cache breakpoints, a batch). Standard library only, like the server.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

MAX_MESSAGE_BYTES = 32 * 1024 * 1024  # the real API's request size limit for /v1/messages
CUSTOM_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")
Reply = tuple[int, dict[str, str], bytes]


@dataclass
class Step:
    """One scripted answer; build it with the module-level constructors (`tool_use`, `error`, ...)."""

    kind: str  # tool_use | text | refusal | max_tokens | error | hang | raw
    input: dict[str, Any] | None = None
    name: str | None = None
    text: str = ""
    stop_reason: str = "end_turn"
    usage: dict[str, int] | None = None
    status: int = 200
    error_type: str = "api_error"
    message: str = ""
    retry_after: float | None = None
    seconds: float = 0.0
    then: Step | None = None
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Recorded:
    """A request as the server saw it; `body` is the parsed JSON (None when absent or invalid)."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    query: str = ""
    at: float = field(default_factory=time.monotonic)


Responder = Callable[[dict[str, Any]], "Step | dict[str, Any]"]


def tool_use(input: dict[str, Any], name: str | None = None, usage: dict[str, int] | None = None) -> Step:
    """A single tool_use block; `name` defaults to the request's forced tool (or its first tool)."""
    return Step("tool_use", input=input, name=name, stop_reason="tool_use", usage=usage)


def text(text: str, stop_reason: str = "end_turn", usage: dict[str, int] | None = None) -> Step:
    """A single text block."""
    return Step("text", text=text, stop_reason=stop_reason, usage=usage)


def refusal(text: str = "I can't help with that.") -> Step:
    """What the API returns when the model declines: 200 with stop_reason "refusal"."""
    return Step("refusal", text=text, stop_reason="refusal")


def max_tokens(partial_input: dict[str, Any], name: str | None = None) -> Step:
    """A tool call cut off by max_tokens: the caller must not trust `partial_input`."""
    return Step("max_tokens", input=partial_input, name=name, stop_reason="max_tokens")


def error(
    status: int, type: str, message: str = "Error injected by FakeAnthropic", retry_after: float | None = None
) -> Step:
    """An error in Anthropic's exact JSON shape, optionally with a `retry-after` header."""
    return Step("error", status=status, error_type=type, message=message, retry_after=retry_after)


def rate_limited(retry_after: float | None = 1.0) -> Step:
    """429 rate_limit_error; the SDK retries it, honouring `retry-after`."""
    return error(429, "rate_limit_error", "Number of request tokens has exceeded your rate limit", retry_after)


def overloaded(retry_after: float | None = None) -> Step:
    """529 overloaded_error (surfaces as `anthropic.OverloadedError` once retries run out)."""
    return error(529, "overloaded_error", "Overloaded", retry_after)


def server_error(retry_after: float | None = None) -> Step:
    """500 api_error (surfaces as `anthropic.InternalServerError`)."""
    return error(500, "api_error", "Internal server error", retry_after)


def hang(seconds: float, then: Step | None = None) -> Step:
    """Sleep before answering (to trip client timeouts); then answer `then` or what the responder says."""
    return Step("hang", seconds=seconds, then=then)


def raw(status: int, body: str | bytes, headers: dict[str, str] | None = None) -> Step:
    """An arbitrary response, e.g. a malformed JSON body."""
    return Step(
        "raw", status=status, body=body.encode() if isinstance(body, str) else body, headers=dict(headers or {})
    )


def default_responder(body: dict[str, Any]) -> Step:
    """Used when nothing is scripted: a plain "ok"."""
    return text("ok")


def echo_responder(body: dict[str, Any]) -> Step:
    """Echo the last user text back; handy for `--responder support.fake_anthropic:echo_responder` (from tests/)."""
    content = (body.get("messages") or [{}])[-1].get("content", "")
    if isinstance(content, list):
        content = " ".join(b.get("text", "") for b in content if isinstance(b, dict))
    return text(str(content))


def _as_step(result: Step | dict[str, Any]) -> Step:
    """Responders may return a bare dict as shorthand for a tool_use input. Other results are
    duck-typed, because a responder loaded under another module name has its own `Step` class."""
    return tool_use(result) if isinstance(result, dict) else result


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _json(obj: Any) -> bytes:
    return json.dumps(obj).encode()


def _error_reply(status: int, type: str, message: str, retry_after: float | None = None) -> Reply:
    headers = {} if retry_after is None else {"retry-after": f"{retry_after:g}"}
    return status, headers, _json({"type": "error", "error": {"type": type, "message": message}})


def _invalid_params(body: Any) -> str | None:
    """The few checks the real API makes that a hand-built request (or batch params) might fail."""
    if not isinstance(body, dict):
        return "request body must be a JSON object"
    for key, kind in (("model", str), ("max_tokens", int), ("messages", list)):
        if not isinstance(body.get(key), kind):
            return f"{key}: Field required"
    if body.get("stream"):
        return "stream: streaming is not supported by FakeAnthropic"
    return None


def _cache_breakpoints(body: dict[str, Any]) -> list[tuple[str, int]]:
    """(prefix hash, prefix tokens) for each cache_control breakpoint, in prompt order
    (tools, then system, then messages), so a later request can hit any earlier cached prefix."""
    items: list[tuple[str, Any]] = [("tool", t) for t in body.get("tools") or []]
    system = body.get("system")
    items += [("system", b) for b in (system if isinstance(system, list) else [system] if system else [])]
    for msg in body.get("messages") or []:
        content = msg.get("content")
        items += [(str(msg.get("role")), b) for b in (content if isinstance(content, list) else [content])]
    digest, size, out = hashlib.sha256(str(body.get("model")).encode()), 0, []
    for where, item in items:
        marked = isinstance(item, dict) and "cache_control" in item
        plain = {k: v for k, v in item.items() if k != "cache_control"} if isinstance(item, dict) else item
        chunk = where + json.dumps(plain, sort_keys=True)
        digest.update(chunk.encode())
        size += len(chunk)
        if marked:
            out.append((digest.hexdigest(), size // 4))
    return out


@dataclass
class _Batch:
    obj: dict[str, Any]
    requests: list[dict[str, Any]]
    results: list[dict[str, Any]] | None = None
