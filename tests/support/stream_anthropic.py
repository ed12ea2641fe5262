"""A local stand-in for Anthropic's streaming Messages API, for the real Claude Code CLI.

Claude Code sends ``POST /v1/messages?beta=true`` with ``"stream": true`` and reads server-sent
events (message_start, content_block_start / delta / stop, message_delta, message_stop), which
tests/support/fake_anthropic.py does not speak. This server answers every request with one text block
(``reply``, a string or a function of the request body), streamed as those events, and records
every request body, so a test can read what the CLI sent to the model (its system prompt and the
context hooks added). Non-streaming requests get the same text as one JSON message. Any other path
(``count_tokens``, telemetry) gets an empty ``{}`` 200. Standard library only.

A reply may also be a :class:`ToolUse` (the answer calls a tool: with ``--json-schema`` the CLI asks
for its ``StructuredOutput`` tool) or a :class:`Fault` (an HTTP error status with Anthropic's error
body), so tests can script what the model answers and how the service fails.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit


@dataclass(frozen=True)
class ToolUse:
    """An answer that calls ``name`` with ``input`` (streamed as input_json_delta; stop_reason tool_use)."""

    input: Any
    name: str = "StructuredOutput"


@dataclass(frozen=True)
class Fault:
    """An error answer: ``status`` with Anthropic's error body (e.g. 500 api_error, 529 overloaded_error)."""

    status: int
    type: str = "api_error"
    message: str = "Internal server error"


Answer = str | ToolUse | Fault
Reply = Answer | Callable[[dict[str, Any]], Answer]


@dataclass
class Request:
    """A request as the server saw it: its path (no query), its query string and its parsed JSON body."""

    path: str
    query: str
    body: Any

    def text(self) -> str:
        """Everything the model would read (system prompt and messages), as one string."""
        return (
            json.dumps({"system": self.body.get("system"), "messages": self.body.get("messages")}, ensure_ascii=False)
            if isinstance(self.body, dict)
            else ""
        )


@dataclass
class StreamAnthropic:
    """The server; use as a context manager, read ``base_url`` and ``requests``."""

    reply: Reply = "Noted."
    requests: list[Request] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        assert self._server is not None, "start() the server first"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def messages(self) -> list[Request]:
        """The requests to the Messages endpoint (what the model was asked), oldest first."""
        with self._lock:
            return [r for r in self.requests if r.path == "/v1/messages"]

    def start(self) -> StreamAnthropic:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._send_json(200, {})

            def do_HEAD(self) -> None:
                self._send_json(200, {})

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                parts = urlsplit(self.path)
                with outer._lock:
                    outer.requests.append(Request(parts.path, parts.query, body))
                if parts.path != "/v1/messages" or not isinstance(body, dict):
                    self._send_json(200, {"input_tokens": 1} if parts.path.endswith("count_tokens") else {})
                    return
                answer = outer.reply(body) if callable(outer.reply) else outer.reply
                if isinstance(answer, Fault):
                    self._send_json(
                        answer.status, {"type": "error", "error": {"type": answer.type, "message": answer.message}}
                    )
                elif isinstance(answer, ToolUse):
                    self._stream_tool(body, answer)
                elif body.get("stream"):
                    self._stream(body, answer)
                else:
                    self._send_json(200, _message(body, answer))

            def _send_json(self, status: int, obj: Any) -> None:
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, body: dict[str, Any], text: str) -> None:
                message = _message(body, "")
                message["content"] = []
                message["stop_reason"] = None
                events: list[tuple[str, dict[str, Any]]] = [
                    ("message_start", {"type": "message_start", "message": message}),
                    (
                        "content_block_start",
                        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                    ),
                    (
                        "content_block_delta",
                        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
                    ),
                    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                    (
                        "message_delta",
                        {
                            "type": "message_delta",
                            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                            "usage": {"output_tokens": max(1, len(text) // 4)},
                        },
                    ),
                    ("message_stop", {"type": "message_stop"}),
                ]
                data = b"".join(f"event: {name}\ndata: {json.dumps(obj)}\n\n".encode() for name, obj in events)
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream_tool(self, body: dict[str, Any], answer: ToolUse) -> None:
                message = _message(body, "")
                message["content"] = []
                message["stop_reason"] = None
                partial = json.dumps(answer.input)
                block = {"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:24]}", "name": answer.name, "input": {}}
                events: list[tuple[str, dict[str, Any]]] = [
                    ("message_start", {"type": "message_start", "message": message}),
                    ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}),
                    (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": 0,
                            "delta": {"type": "input_json_delta", "partial_json": partial},
                        },
                    ),
                    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                    (
                        "message_delta",
                        {
                            "type": "message_delta",
                            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                            "usage": {"output_tokens": max(1, len(partial) // 4)},
                        },
                    ),
                    ("message_stop", {"type": "message_stop"}),
                ]
                data = b"".join(f"event: {name}\ndata: {json.dumps(obj)}\n\n".encode() for name, obj in events)
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="stream-anthropic", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> StreamAnthropic:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _message(body: dict[str, Any], text: str) -> dict[str, Any]:
    return {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "claude-stand-in"),
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 10,
            "output_tokens": max(1, len(text) // 4),
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }
