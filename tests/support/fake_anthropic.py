"""A local stand-in for Anthropic's HTTP API, driven by the real `anthropic` SDK.

Tests and benchmarks point `anthropic.Anthropic(base_url=fake.base_url, ...)` at this server instead
of mocking the SDK, so the SDK's own retries, timeouts, error mapping and parsing are exercised for
real. The server scripts outputs (a FIFO of `Step`s, then a `responder`), latency and faults, and
records every request. Standard library only, so it also runs as a separate process:

    python tests/support/fake_anthropic.py --port 0 --latency 2.0 [--responder module:function]
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import re
import signal
import sys
import threading
import time
import traceback
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

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


class FakeAnthropic:
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

    @property
    def batch_responder(self) -> Responder:
        """Answers batch requests; follows `responder` unless set. Batches never touch `enqueue`'s FIFO."""
        return self._batch_responder or self.responder

    @batch_responder.setter
    def batch_responder(self, value: Responder | None) -> None:
        self._batch_responder = value

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

    def end_batches(self) -> None:
        """End every batch still in progress now rather than after ``batch_delay``: a test that needs a
        batch in progress until a point of its choosing sets a long ``batch_delay``, then calls this."""
        with self._lock:
            pending = [batch_id for batch_id, batch in self._batches.items() if batch.results is None]
        for batch_id in pending:
            self._finish_batch(batch_id)

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
        self._sleep(self.latency)
        return self._render(step or _as_step(self.responder(body)), body, self.responder)

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

    # --- Message Batches -----------------------------------------------------------------------

    def _create_batch(self, body: Any) -> Reply:
        reqs = body.get("requests") if isinstance(body, dict) else None
        if not isinstance(reqs, list) or not reqs:
            return _error_reply(400, "invalid_request_error", "requests: must be a non-empty list")
        if len(reqs) > self.max_batch_requests:
            return _error_reply(
                400, "invalid_request_error", f"requests: at most {self.max_batch_requests} requests per batch"
            )
        seen: set[str] = set()
        for i, req in enumerate(reqs):
            cid = req.get("custom_id") if isinstance(req, dict) else None
            if not isinstance(cid, str) or not CUSTOM_ID.fullmatch(cid):
                return _error_reply(
                    400, "invalid_request_error", f"requests.{i}.custom_id: must match ^[a-zA-Z0-9_-]{{1,64}}$"
                )
            if cid in seen:
                return _error_reply(400, "invalid_request_error", f"requests.{i}.custom_id: duplicate {cid!r}")
            if not isinstance(req.get("params"), dict):
                return _error_reply(400, "invalid_request_error", f"requests.{i}.params: Field required")
            seen.add(cid)
        created = datetime.now(UTC)
        batch_id = f"msgbatch_{uuid.uuid4().hex[:24]}"
        obj = {
            "id": batch_id,
            "type": "message_batch",
            "processing_status": "in_progress",
            "request_counts": {"processing": len(reqs), "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0},
            "created_at": _now(),
            "expires_at": (created + timedelta(hours=24)).isoformat().replace("+00:00", "Z"),
            "ended_at": None,
            "cancel_initiated_at": None,
            "archived_at": None,
            "results_url": None,
        }
        timer = threading.Timer(self.batch_delay, self._finish_batch, args=(batch_id,))
        timer.daemon = True
        with self._lock:
            self._batches[batch_id] = _Batch(obj, reqs)
            self._timers.append(timer)
        timer.start()
        return 200, {}, _json(obj)

    def _finish_batch(self, batch_id: str) -> None:
        """Runs in a timer thread: answer every request, then mark the batch ended."""
        with self._lock:
            batch = self._batches[batch_id]
            canceled = batch.obj["processing_status"] == "canceling"
            failing = set(self.fail_batch_requests)
        results = [
            {"custom_id": r["custom_id"], "result": self._batch_result(r, canceled, failing)} for r in batch.requests
        ]
        counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        for r in results:
            counts[r["result"]["type"]] += 1
        with self._lock:
            batch.results = results
            batch.obj.update(
                processing_status="ended",
                request_counts=counts,
                ended_at=_now(),
                results_url=f"{self.base_url}/v1/messages/batches/{batch_id}/results",
            )

    def _batch_result(self, req: dict[str, Any], canceled: bool, failing: set[str]) -> dict[str, Any]:
        def errored(type: str, message: str) -> dict[str, Any]:
            return {"type": "errored", "error": {"type": "error", "error": {"type": type, "message": message}}}

        if canceled:
            return {"type": "canceled"}
        if req["custom_id"] in failing:
            return errored("api_error", "Injected failure (fail_batch_requests)")
        params = req["params"]
        problem = _invalid_params(params)
        if problem:
            return errored("invalid_request_error", problem)
        try:
            step = _as_step(self.batch_responder(params))
            while step.kind == "hang":  # batches are asynchronous anyway: no point sleeping
                step = step.then or _as_step(self.batch_responder(params))
        except Exception as exc:  # keep the timer thread alive and the failure visible
            return errored("api_error", f"batch_responder raised {exc!r}")
        if step.kind == "error":
            return errored(step.error_type, step.message)
        if step.kind == "raw":
            return errored("api_error", "raw response in a batch")
        return {"type": "succeeded", "message": self._message(step, params)}

    def _batch_endpoint(self, method: str, batch_id: str, action: str) -> Reply:
        with self._lock:
            batch = self._batches.get(batch_id)
            if batch is None:
                return _error_reply(404, "not_found_error", f"Message batch {batch_id} not found")
            if (method, action) == ("GET", ""):
                return 200, {}, _json(batch.obj)
            if (method, action) == ("POST", "/cancel"):
                if batch.obj["processing_status"] == "in_progress":
                    batch.obj.update(processing_status="canceling", cancel_initiated_at=_now())
                return 200, {}, _json(batch.obj)
            if (method, action) == ("GET", "/results"):
                if batch.results is None:
                    return _error_reply(404, "not_found_error", f"Results for {batch_id} are not available yet")
                lines = b"".join(_json(r) + b"\n" for r in batch.results)
                return 200, {"content-type": "application/x-jsonl"}, lines
            if (method, action) == ("DELETE", ""):
                if batch.results is None:
                    return _error_reply(400, "invalid_request_error", "Batch is still processing")
                del self._batches[batch_id]
                return 200, {}, _json({"id": batch_id, "type": "message_batch_deleted"})
        return _error_reply(405, "invalid_request_error", f"{method} not allowed here")

    def _list_batches(self, query: dict[str, list[str]]) -> Reply:
        """Newest first, paginated with after_id / before_id / limit like the real API."""
        with self._lock:
            objs = [b.obj for b in reversed(self._batches.values())]
        ids = [o["id"] for o in objs]
        limit = int(query.get("limit", ["20"])[0])
        if "after_id" in query and query["after_id"][0] in ids:
            start = ids.index(query["after_id"][0]) + 1
            page, has_more = objs[start : start + limit], start + limit < len(objs)
        elif "before_id" in query and query["before_id"][0] in ids:
            end = ids.index(query["before_id"][0])
            page, has_more = objs[max(end - limit, 0) : end], end - limit > 0
        else:
            page, has_more = objs[:limit], limit < len(objs)
        return (
            200,
            {},
            _json(
                {
                    "data": page,
                    "has_more": has_more,
                    "first_id": page[0]["id"] if page else None,
                    "last_id": page[-1]["id"] if page else None,
                }
            ),
        )


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
