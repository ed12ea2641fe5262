"""A local stand-in for Anthropic's HTTP API, driven by the real `anthropic` SDK.

Tests and benchmarks point `anthropic.Anthropic(base_url=fake.base_url, ...)` at this server instead
of mocking the SDK, so the SDK's own retries, timeouts, error mapping and parsing are exercised for
real. The server scripts outputs (a FIFO of `Step`s, then a `responder`), latency and faults, and
records every request. Standard library only, so it also runs as a separate process:

    python tests/support/fake_anthropic.py --port 0 --latency 2.0 [--responder module:function]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import signal
import sys
import threading
import traceback
import uuid
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

if __package__ in (None, ""):  # run as a script: tests/ on the path, so `support` imports as it does in the tests
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from support.anthropic_batches import MessageBatches
from support.anthropic_steps import (
    MAX_MESSAGE_BYTES,
    Recorded,
    Reply,
    Responder,
    Step,
    _as_step,
    _Batch,
    _cache_breakpoints,
    _error_reply,
    _invalid_params,
    _json,
    default_responder,
    echo_responder,
    error,
    hang,
    max_tokens,
    overloaded,
    rate_limited,
    raw,
    refusal,
    server_error,
    text,
    tool_use,
)

# The scripted answers and the responders are part of this module's interface (fa.tool_use, fa.Step, ...).
__all__ = [
    "FakeAnthropic",
    "Recorded",
    "Responder",
    "Step",
    "default_responder",
    "echo_responder",
    "error",
    "hang",
    "max_tokens",
    "overloaded",
    "rate_limited",
    "raw",
    "refusal",
    "server_error",
    "text",
    "tool_use",
]


class _HTTPServer(ThreadingHTTPServer):
    """One thread per connection; don't join handler threads on close (keep-alive readers and
    hangs would block `stop`), and stay quiet when a timed-out client has gone away."""

    daemon_threads = True
    block_on_close = False
    request_queue_size = 512
    fake: FakeAnthropic

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like the real API
    disable_nagle_algorithm = True  # headers and body go out in separate writes: no 40 ms delayed-ACK stall
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        """Silence per-request logging; `FakeAnthropic.requests` is the log."""

    def do_GET(self) -> None:
        self.server.fake._handle(self, "GET")

    def do_POST(self) -> None:
        self.server.fake._handle(self, "POST")

    def do_DELETE(self) -> None:
        self.server.fake._handle(self, "DELETE")


class FakeAnthropic(MessageBatches):
    """The server. State (script, recordings, prompt cache, batches) lives here, so any number of
    SDK clients can share it."""

    def __init__(
        self, responder: Responder | None = None, latency: float = 0.0, *, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.responder: Responder = responder or default_responder
        self.latency = latency
        self.batch_delay = 0.2
        self.fail_batch_requests: set[str] = set()
        self.max_batch_requests = 100_000
        self.max_batch_bytes = 256 * 1024 * 1024
        self.min_cache_tokens = 0  # the real API ignores prefixes under ~1024 tokens; raise to mimic
        # Concurrency, counted rather than timed: message requests being answered now, the most at once so far,
        # and `hold`: keep each one until that many are in flight together (a serial server never gets there:
        # after `hold_timeout` seconds each held request is answered 500, saying how many it saw at once).
        self.in_flight = 0
        self.peak_in_flight = 0
        self.hold = 0
        self.hold_timeout = 60.0
        self._flight = threading.Condition()
        self.requests: list[Recorded] = []
        self.base_url = ""
        self._batch_responder: Responder | None = None
        self._host, self._port = host, port
        self._queue: deque[Step] = deque()
        self._cache: set[str] = set()
        self._batches: dict[str, _Batch] = {}
        self._timers: list[threading.Timer] = []
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> FakeAnthropic:
        """Bind (a free port by default) and serve from a daemon thread."""
        self._httpd = _HTTPServer((self._host, self._port), _Handler)
        self._httpd.fake = self
        self.base_url = f"http://{self._host}:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.05,), name="fake-anthropic", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; wakes any handler that is sleeping for latency or a hang."""
        self._stopping.set()
        with self._flight:  # and any request held for company
            self._flight.notify_all()
        with self._lock:
            for timer in self._timers:
                timer.cancel()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> FakeAnthropic:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def enqueue(self, *steps: Step) -> None:
        """Script the next POST /v1/messages answers, one step per request, first in first out."""
        with self._lock:
            self._queue.extend(steps)

    def calls(self, path: str = "/v1/messages", method: str = "POST") -> list[Recorded]:
        """Recorded requests to one endpoint (by default: message creations)."""
        with self._lock:
            return [r for r in self.requests if r.path == path and r.method == method]

    # --- HTTP plumbing -------------------------------------------------------------------------

    def _handle(self, handler: _Handler, method: str) -> None:
        url = urlsplit(handler.path)
        headers = {k.lower(): v for k, v in handler.headers.items()}
        length = int(headers.get("content-length") or 0)
        limit = self.max_batch_bytes if url.path == "/v1/messages/batches" else MAX_MESSAGE_BYTES
        body: Any = None
        reply: Reply | None = None
        if length > limit:  # refuse without reading, as the real API does (413)
            handler.close_connection = True
            reply = _error_reply(413, "request_too_large", f"Request exceeds the maximum size of {limit} bytes")
        else:
            data = handler.rfile.read(length) if length else b""
            try:
                body = json.loads(data) if data else None
            except ValueError:
                reply = _error_reply(400, "invalid_request_error", "Request body is not valid JSON")
        with self._lock:
            self.requests.append(Recorded(method, url.path, headers, body, url.query))
        if reply is None:
            try:
                reply = self._route(method, url.path, parse_qs(url.query), body)
            except Exception as exc:  # a bug here should reach the test as a 500, not a hung socket
                traceback.print_exc()
                reply = _error_reply(500, "api_error", f"FakeAnthropic crashed: {exc!r}")
        status, extra, payload = reply
        handler.send_response(status)
        out = {
            "content-type": "application/json",
            "request-id": f"req_{uuid.uuid4().hex[:24]}",
            **{k.lower(): v for k, v in extra.items()},
        }
        for key, value in out.items():
            handler.send_header(key, value)
        handler.send_header("content-length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)

    def _route(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> Reply:
        if (method, path) == ("POST", "/v1/messages"):
            return self._create_message(body)
        if (method, path) == ("POST", "/v1/messages/count_tokens"):
            return 200, {}, _json({"input_tokens": len(json.dumps(body)) // 4})
        if (method, path) == ("POST", "/v1/messages/batches"):
            return self._create_batch(body)
        if (method, path) == ("GET", "/v1/messages/batches"):
            return self._list_batches(query)
        match = re.fullmatch(r"/v1/messages/batches/([^/]+)(/results|/cancel)?", path)
        if match is None:
            return _error_reply(404, "not_found_error", f"Not found: {method} {path}")
        return self._batch_endpoint(method, match.group(1), match.group(2) or "")

    def _sleep(self, seconds: float) -> None:
        """Sleep that `stop()` interrupts, so teardown never waits on a scripted hang."""
        if seconds > 0:
            self._stopping.wait(seconds)

    # --- Messages ------------------------------------------------------------------------------

    def _create_message(self, body: Any) -> Reply:
        problem = _invalid_params(body)
        if problem:
            return _error_reply(400, "invalid_request_error", problem)
        with self._lock:  # take the step on arrival, so the FIFO follows arrival order
            step = self._queue.popleft() if self._queue else None
        with self._flight:
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            self._flight.notify_all()
        try:
            if not self._held():
                return _error_reply(500, "api_error", f"held: only {self.peak_in_flight} of {self.hold} in flight")
            self._sleep(self.latency)
            return self._render(step or _as_step(self.responder(body)), body, self.responder)
        finally:
            with self._flight:
                self.in_flight -= 1

    def _held(self) -> bool:
        """Wait until `hold` message requests are in flight at once (at once if hold is 0); False on timeout."""
        with self._flight:
            return self._flight.wait_for(
                lambda: self.peak_in_flight >= self.hold or self._stopping.is_set(), self.hold_timeout
            )

    def _render(self, step: Step, body: dict[str, Any], responder: Responder) -> Reply:
        if step.kind == "hang":
            self._sleep(step.seconds)
            return self._render(step.then or _as_step(responder(body)), body, responder)
        if step.kind == "raw":
            return step.status, dict(step.headers), step.body
        if step.kind == "error":
            return _error_reply(step.status, step.error_type, step.message, step.retry_after)
        return 200, {}, _json(self._message(step, body))

    def _message(self, step: Step, body: dict[str, Any]) -> dict[str, Any]:
        if step.kind in ("tool_use", "max_tokens"):
            choice, tools = body.get("tool_choice") or {}, body.get("tools") or [{}]
            name = step.name or choice.get("name") or tools[0].get("name") or "tool"
            block = {"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:24]}", "name": name, "input": step.input}
        else:
            block = {"type": "text", "text": step.text}
        usage = {**self._usage(body, [block]), **(step.usage or {})}
        return {
            "id": f"msg_{uuid.uuid4().hex[:24]}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": [block],
            "stop_reason": step.stop_reason,
            "stop_sequence": None,
            "usage": usage,
        }

    def _usage(self, body: dict[str, Any], content: list[dict[str, Any]]) -> dict[str, int]:
        """Rough token counts, with prompt caching: the first request with a cached prefix pays
        cache_creation, later ones with the same prefix get cache_read; input_tokens is the rest."""
        total = len(json.dumps(body)) // 4
        points = [p for p in _cache_breakpoints(body) if p[1] >= self.min_cache_tokens]
        read = created = 0
        if points:
            with self._lock:
                read = max((tokens for key, tokens in points if key in self._cache), default=0)
                created = points[-1][1] - read
                self._cache.update(key for key, _ in points)
        return {
            "input_tokens": max(total - read - created, 0),
            "output_tokens": max(len(json.dumps(content)) // 4, 1),
            "cache_creation_input_tokens": created,
            "cache_read_input_tokens": read,
        }


def _import_callable(spec: str) -> Responder:
    """Load `module:function` (or `module.function`), importable from the current directory."""
    module, _, attr = spec.partition(":") if ":" in spec else spec.rpartition(".")
    sys.path.insert(0, os.getcwd())
    responder: Responder = getattr(importlib.import_module(module), attr)
    return responder


def main(argv: list[str] | None = None) -> int:
    """Serve as a separate process (for benchmarks and crash tests) until SIGTERM/SIGINT."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--batch-delay", type=float, default=0.2)
    parser.add_argument("--responder", help="module:function returning a Step or a tool input dict")
    args = parser.parse_args(argv)
    responder = _import_callable(args.responder) if args.responder else None
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    with FakeAnthropic(responder, args.latency, host=args.host, port=args.port) as server:
        server.batch_delay = args.batch_delay
        print(f"FAKE_ANTHROPIC_URL={server.base_url}", flush=True)
        while not done.wait(0.5):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
