"""A local stand-in for an OpenAI-compatible Chat Completions server, driven by the real `openai` SDK.

Tests point `openai.OpenAI(base_url=fake.base_url, ...)` (or OPENAI_BASE_URL) at it instead of mocking
the SDK, so the SDK's retries, timeouts, error mapping and parsing run for real. It answers
``POST /v1/chat/completions`` from a FIFO of scripted `Step`s, then a `responder`; it records every
request; and it can refuse output modes as servers do (``supports``: which of json_schema, tools and
json_object it accepts; the others get the 400 a server without them sends). Standard library only:

    python tests/support/fake_openai.py --port 0
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
import traceback
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = tuple[int, dict[str, str], bytes]
ALL_MODES = frozenset({"json_schema", "tools", "json_object"})


@dataclass
class Step:
    """One scripted answer; build it with the module-level constructors."""

    kind: str  # answer | content | tool_call | refusal | length | empty | error | hang | raw (also html, redirect)
    data: Any = None  # answer: the object, delivered as the request's mode asks (tool call or content)
    text: str | None = None
    finish_reason: str = "stop"
    usage: dict[str, int] | None = None
    status: int = 200
    message: str = ""
    retry_after: float | None = None
    seconds: float = 0.0
    then: Step | None = None
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    at: float = field(default_factory=time.monotonic)


Responder = Callable[[dict[str, Any]], "Step | dict[str, Any]"]


def answer(data: Any, usage: dict[str, int] | None = None) -> Step:
    """The object, as the request asked for it: a call of its forced function, else JSON content."""
    return Step("answer", data=data, usage=usage)


def content(text: str | None, finish_reason: str = "stop") -> Step:
    """A message with exactly this content (prose, malformed JSON, nothing: None)."""
    return Step("content", text=text, finish_reason=finish_reason)


def tool_call(arguments: str, name: str | None = None) -> Step:
    """A function call with these raw arguments (JSON text, possibly broken)."""
    return Step("tool_call", text=arguments, data=name, finish_reason="tool_calls")


def refusal(text: str = "I'm sorry, I can't help with that.") -> Step:
    """OpenAI's structured-output refusal: ``message.refusal`` set, no content."""
    return Step("refusal", text=text)


def length(partial: str = '{"summary": "The user asked ab') -> Step:
    """An answer cut off at max_tokens: finish_reason length."""
    return Step("length", text=partial, finish_reason="length")


def empty() -> Step:
    """A 200 with no choices at all."""
    return Step("empty")


def error(status: int, message: str = "Error injected by FakeOpenAI", retry_after: float | None = None) -> Step:
    """An error in OpenAI's JSON shape."""
    return Step("error", status=status, message=message, retry_after=retry_after)


def hang(seconds: float, then: Step | None = None) -> Step:
    """Sleep before answering (to trip client timeouts)."""
    return Step("hang", seconds=seconds, then=then)


def raw(status: int, body: str | bytes, content_type: str = "application/json") -> Step:
    """Any body, e.g. one that is not JSON, sent as ``content_type``."""
    return Step(
        "raw",
        status=status,
        body=body.encode() if isinstance(body, str) else body,
        headers={"content-type": content_type},
    )


def html(page: str, status: int = 200) -> Step:
    """An HTML page, as a proxy or a login wall in front of the server answers."""
    return raw(status, page, "text/html; charset=utf-8")


def redirect(location: str, status: int = 307) -> Step:
    """A redirect to ``location`` (another server, say), with an empty body."""
    return Step("raw", status=status, body=b"", headers={"location": location, "content-type": "text/plain"})


def default_responder(body: dict[str, Any]) -> Step:
    return content("ok")


def _json(obj: Any) -> bytes:
    return json.dumps(obj).encode()


def _error_reply(
    status: int,
    message: str,
    retry_after: float | None = None,
    type: str = "invalid_request_error",
    param: str | None = None,
) -> Reply:
    headers = {} if retry_after is None else {"retry-after": f"{retry_after:g}"}
    return status, headers, _json({"error": {"message": message, "type": type, "param": param, "code": None}})


def mode_of(body: dict[str, Any]) -> str:
    """How the request asks for its answer: tools, json_schema, json_object or text."""
    if body.get("tools"):
        return "tools"
    fmt = body.get("response_format") or {}
    return str(fmt.get("type") or "text")


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    fake: FakeOpenAI

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: `FakeOpenAI.requests` is the log."""

    def do_POST(self) -> None:
        self.server.fake._handle(self, "POST")

    def do_GET(self) -> None:
        self.server.fake._handle(self, "GET")


class FakeOpenAI:
    """The server; ``base_url`` ends in /v1, as OPENAI_BASE_URL does."""

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        supports: frozenset[str] = ALL_MODES,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.responder: Responder = responder or default_responder
        self.supports = supports
        self.requests: list[Recorded] = []
        self.base_url = ""
        self._host, self._port = host, port
        self._queue: deque[Step] = deque()
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> FakeOpenAI:
        self._httpd = _HTTPServer((self._host, self._port), _Handler)
        self._httpd.fake = self
        self.base_url = f"http://{self._host}:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), name="fake-openai", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def enqueue(self, *steps: Step) -> None:
        """Script the next chat completions, one step per request, first in first out."""
        with self._lock:
            self._queue.extend(steps)

    def calls(self) -> list[Recorded]:
        """The chat completion requests so far."""
        with self._lock:
            return [r for r in self.requests if r.path == "/v1/chat/completions"]

    # --- HTTP -------------------------------------------------------------------------------

    def _handle(self, handler: _Handler, method: str) -> None:
        path = handler.path.split("?", 1)[0]
        headers = {k.lower(): v for k, v in handler.headers.items()}
        length_ = int(headers.get("content-length") or 0)
        data = handler.rfile.read(length_) if length_ else b""
        body: Any = None
        reply: Reply | None = None
        try:
            body = json.loads(data) if data else None
        except ValueError:
            reply = _error_reply(400, "We could not parse the JSON body of your request.")
        with self._lock:
            self.requests.append(Recorded(method, path, headers, body))
        if reply is None:
            try:
                reply = self._route(method, path, body)
            except Exception as exc:  # a bug here reaches the test as a 500, not a hung socket
                traceback.print_exc()
                reply = _error_reply(500, f"FakeOpenAI crashed: {exc!r}", type="server_error")
        status, extra, payload = reply
        handler.send_response(status)
        for key, value in {"content-type": "application/json", **extra}.items():
            handler.send_header(key, value)
        handler.send_header("content-length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)

    def _route(self, method: str, path: str, body: Any) -> Reply:
        if (method, path) == ("GET", "/v1/models"):
            return 200, {}, _json({"object": "list", "data": [{"id": "fake-model", "object": "model"}]})
        if (method, path) != ("POST", "/v1/chat/completions"):
            return _error_reply(404, f"Unknown request URL: {method} {path}", type="not_found")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body.get("model"):
            return _error_reply(400, "messages and model are required")
        mode = mode_of(body)
        if mode in ALL_MODES and mode not in self.supports:  # what a server without the feature says
            param = "tools" if mode == "tools" else "response_format"
            return _error_reply(400, f"{param} of type '{mode}' is not supported by this server", param=param)
        with self._lock:
            step = self._queue.popleft() if self._queue else None
        if step is None:
            result = self.responder(body)
            step = answer(result) if isinstance(result, dict) else result
        return self._render(step, body)

    def _render(self, step: Step, body: dict[str, Any]) -> Reply:
        if step.kind == "hang":
            self._stopping.wait(step.seconds)
            then = step.then or self.responder(body)
            return self._render(answer(then) if isinstance(then, dict) else then, body)
        if step.kind == "raw":
            return step.status, step.headers, step.body
        if step.kind == "error":
            kind = (
                "rate_limit_exceeded"
                if step.status == 429
                else "server_error"
                if step.status >= 500
                else "invalid_request_error"
            )
            return _error_reply(step.status, step.message, step.retry_after, type=kind)
        message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None}
        finish = step.finish_reason
        if step.kind == "answer":
            text = json.dumps(step.data)
            if mode_of(body) == "tools":
                self._call(message, body, text, None)
                finish = "tool_calls"
            else:
                message["content"] = text
        elif step.kind == "tool_call":
            self._call(message, body, step.text or "", step.data)
        elif step.kind == "refusal":
            message["refusal"] = step.text
        elif step.kind in ("content", "length"):
            message["content"] = step.text
        out = json.dumps(message.get("content") or message.get("tool_calls") or "")
        usage = {"prompt_tokens": len(json.dumps(body["messages"])) // 4, "completion_tokens": len(out) // 4}
        usage = {**usage, **(step.usage or {})}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        choices = (
            []
            if step.kind == "empty"
            else [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}]
        )
        return (
            200,
            {},
            _json(
                {
                    "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body["model"],
                    "choices": choices,
                    "usage": usage,
                }
            ),
        )

    @staticmethod
    def _call(message: dict[str, Any], body: dict[str, Any], arguments: str, name: str | None) -> None:
        forced = ((body.get("tool_choice") or {}).get("function") or {}).get("name")
        tools = body.get("tools") or [{"function": {"name": "tool"}}]
        message["tool_calls"] = [
            {
                "id": f"call_{uuid.uuid4().hex[:20]}",
                "type": "function",
                "function": {"name": name or forced or tools[0]["function"]["name"], "arguments": arguments},
            }
        ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    fake = FakeOpenAI(port=args.port).start()
    print(fake.base_url, flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    fake.stop()


if __name__ == "__main__":
    main()
