"""One pure ASGI middleware around every request: its id, the body limit, metrics, the access log,
and the last line of defence against an unexpected exception.

- ``X-Request-Id``: taken from the request when it is a sane token, made up otherwise, echoed on
  the response and put in every error body and log line.
- The body limit (``Settings.api_max_body``, 5 MiB) is enforced when the body is first read, on the declared
  Content-Length and on the bytes as they stream in, so a request that lies about (or omits)
  Content-Length is stopped too: 413, nothing read further. Only when it is read: a route admits the
  request's key first (:class:`jobs.service.auth.KeyFirstRoute`), so a request without a valid key
  gets 401 whatever its size, and its body is never read.
- The body time limit (``Settings.api_body_timeout_seconds``): the whole body must be in within that time of
  the route's first read of it, however slowly it trickles, or the request answers 408 and the connection is
  closed. uvicorn's own timeouts cover keep-alive only, and jobs.service.server's header deadline ends when
  the headers are in, so a client with a valid key could hold a worker's request open for ever by sending a
  byte every few seconds.
- ``Cache-Control: no-store`` and ``X-Content-Type-Options: nosniff`` on every answer that does not set
  its own: most of what the service answers is somebody's memory, which no browser or proxy cache
  should keep, and no answer is meant to be sniffed into another type.
- While the database is known to be down (:class:`jobs.service.errors.Breaker`), every request but
  ``/healthz`` answers 503 with ``Retry-After`` at once, its body unread.
- An exception no handler took becomes a 500 JSON body naming the request id, logged with its
  traceback; the worker carries on with the next request.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
import uuid

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from jobs.service.errors import RETRY_AFTER_OUTAGE, Breaker
from jobs.service.metrics import Metrics

log = logging.getLogger("jobs.service.access")

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_PRIVATE = ((b"cache-control", b"no-store"), (b"x-content-type-options", b"nosniff"))


class RequestMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        *,
        max_body: int,
        metrics: Metrics,
        breaker: Breaker | None = None,
        body_timeout: float = 60.0,
    ) -> None:
        self.app, self.max_body, self.metrics, self.body_timeout = app, max_body, metrics, body_timeout
        self.breaker = breaker or Breaker(RETRY_AFTER_OUTAGE)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = _header(scope, b"x-request-id")
        rid = given if given and _REQUEST_ID.match(given) else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = rid
        started = time.perf_counter()
        status = 500
        sent_start = False
        seen = 0

        async def send_with_id(message: Message) -> None:
            nonlocal status, sent_start
            if message["type"] == "http.response.start":
                status, sent_start = message["status"], True
                headers = message.get("headers", [])
                given_names = {name.lower() for name, _ in headers}
                message = {
                    **message,
                    "headers": [
                        *headers,
                        (b"x-request-id", rid.encode()),
                        *(h for h in _PRIVATE if h[0] not in given_names),
                    ],
                }
            await send(message)

        declared = _header(scope, b"content-length")
        too_large = bool(declared and declared.isdigit() and int(declared) > self.max_body)
        deadline: float | None = None  # set at the first read of the body

        async def limited_receive() -> Message:
            nonlocal seen, deadline
            if too_large:  # said so up front: not one byte of it is read
                raise HTTPException(413, f"request body over the limit of {self.max_body:,} bytes")
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self.body_timeout if deadline is None else deadline
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
            except TimeoutError:
                raise HTTPException(
                    408,
                    f"request body not received within {self.body_timeout:g} s; send it at once",
                    headers={"Connection": "close"},
                ) from None
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_body:
                    raise HTTPException(413, f"request body over the limit of {self.max_body:,} bytes")
            return message

        try:
            wait = None if scope.get("path") == "/healthz" else self.breaker.retry_after()
            if wait is not None:
                await _json(
                    send_with_id,
                    503,
                    "database_unavailable",
                    "the database is unavailable; retry after the time in Retry-After",
                    rid,
                    headers=[(b"retry-after", str(wait).encode())],
                )
            else:
                await self.app(scope, limited_receive, send_with_id)
        except Exception:
            log.exception(
                "unexpected error", extra={"action": "api_error", "request_id": rid, "path": scope.get("path")}
            )
            if not sent_start:
                await _json(
                    send_with_id,
                    500,
                    "internal_error",
                    f"unexpected error; quote request id {rid} when reporting it",
                    rid,
                )
        finally:
            elapsed = time.perf_counter() - started
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            self.metrics.observe(scope["method"], route, status, elapsed)
            log.info(
                "%s %s %d",
                scope["method"],
                route,
                status,
                extra={
                    "action": "api_request",
                    "request_id": rid,
                    "method": scope["method"],
                    "route": route,
                    "status": status,
                    "ms": round(elapsed * 1000, 1),
                    "tenant": scope["state"].get("tenant_id"),
                },
            )


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return str(value.decode("latin-1"))
    return None


async def _json(
    send: Send, status: int, code: str, message: str, rid: str, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = json.dumps({"error": {"code": code, "message": message, "request_id": rid}}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
