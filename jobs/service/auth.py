"""Who is asking: the bearer key, its scopes, and its rate limit.

A route declares its scope with ``Depends(scope("recall"))`` and gets the verified
:class:`~jobs.service.keys.ApiKey`; everything it reads or writes then goes through
``db.tenant(key.tenant_id)``. Missing, malformed, unknown or revoked key: 401 with
``WWW-Authenticate: Bearer``. A key without the scope: 403. Over the key's rate: 429 with ``Retry-After``.

All three are decided before the request's body is read: routers use :class:`KeyFirstRoute`, which
finds the scope a route declares and admits the request (or refuses it) before FastAPI parses the
body, so a client without a key cannot make a worker read megabytes to answer 401.

The rate limit is a token bucket per key and per worker process (requests per second, a burst of
one second's worth): with ``--workers N`` a key may get up to N times its rate in total. A key
created without ``--rate-limit`` gets ``EPISODES_API_RATE_LIMIT`` (20 per second unless set; ``off``
for none).
"""

from __future__ import annotations

import hmac
import math
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import anyio
from fastapi import Depends, Request, Response
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from jobs.concepts import SCOPES, Scope
from jobs.service.errors import ApiError
from jobs.service.keys import ApiKey, KeyVerifier

_bearer = HTTPBearer(auto_error=False, description="An API key from `episodes keys create`.")


class RateLimiter:
    """Token buckets keyed by API key id."""

    def __init__(self, default_rate: float | None) -> None:
        self.default_rate = default_rate
        self._buckets: dict[int, tuple[float, float]] = {}  # key id -> (tokens, last refill)
        self._lock = threading.Lock()

    def wait_for(self, key: ApiKey) -> float:
        """0 when the request may go ahead (and takes a token), else the seconds until it may."""
        rate = key.rate_limit or self.default_rate
        if rate is None:
            return 0.0
        burst = max(1.0, rate)
        now = time.monotonic()
        with self._lock:
            tokens, last = self._buckets.get(key.id, (burst, now))
            tokens = min(burst, tokens + (now - last) * rate)
            if tokens >= 1.0:
                self._buckets[key.id] = (tokens - 1.0, now)
                return 0.0
            self._buckets[key.id] = (tokens, now)
            return (1.0 - tokens) / rate


def _unauthorized(message: str) -> ApiError:
    return ApiError(401, "unauthorized", message, headers={"WWW-Authenticate": "Bearer"})


async def authenticate(request: Request, secret: str | None) -> ApiKey:
    """The live key for the bearer ``secret`` (401 if missing, unknown or revoked), its tenant noted
    on the request for the access log.

    On the event loop: a key verified in the last seconds costs a dictionary lookup, and only a
    cache miss goes to a worker thread for its database lookup. A sync dependency would take a
    thread-pool hand-off on every request (measured: the hand-offs were a sixth of a busy worker's
    time holding the GIL)."""
    if not secret:
        raise _unauthorized("missing API key; send Authorization: Bearer <key>")
    verifier: KeyVerifier = request.app.state.verifier
    known, key = verifier.cached(secret)
    if not known:
        key = await anyio.to_thread.run_sync(verifier.verify, secret)
    if key is None:
        raise _unauthorized("unknown or revoked API key")
    request.state.tenant_id = key.tenant_id
    return key


def operator(request: Request) -> None:
    """A dependency of ``/metrics`` and ``/readyz``: open unless ``EPISODES_METRICS_TOKEN`` is set, then
    only to a request bearing that token (an API key does not open them: they span every tenant)."""
    token: str | None = request.app.state.settings.metrics_token
    if token is None:
        return
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
        raise _unauthorized("this endpoint needs the operator's token (EPISODES_METRICS_TOKEN) as the bearer token")


def throttle(request: Request, key: ApiKey) -> None:
    """Take one of the key's tokens, or answer 429 with ``Retry-After``."""
    limiter: RateLimiter = request.app.state.limiter
    wait = limiter.wait_for(key)
    if wait > 0:
        raise ApiError(
            429,
            "rate_limited",
            "too many requests for this key; retry after the time in Retry-After",
            headers={"Retry-After": str(max(1, math.ceil(wait)))},
        )


async def admit(request: Request, needed: Scope) -> ApiKey:
    """The request's key, which must hold ``needed`` and have a token left (401, 403 or 429 otherwise);
    read from the headers only, so the body is never read for a request that is refused."""
    scheme, _, secret = request.headers.get("authorization", "").partition(" ")
    key = await authenticate(request, secret.strip() if scheme.lower() == "bearer" else None)
    if not key.allows(needed):
        raise ApiError(403, "forbidden", f"this key lacks the {needed!r} scope (it has: {', '.join(key.scopes)})")
    throttle(request, key)
    return key


def scope(needed: Scope) -> Callable[..., Awaitable[ApiKey]]:
    """A dependency: the request's verified key, which must hold the scope ``needed``. On a route of
    :class:`KeyFirstRoute` the key was admitted before the body was read; this returns it."""

    async def authorize(
        request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(_bearer)
    ) -> ApiKey:
        admitted = getattr(request.state, "api_key", None)
        return admitted if isinstance(admitted, ApiKey) else await admit(request, needed)

    setattr(authorize, "needed_scope", needed)  # noqa: B010 - how KeyFirstRoute finds it
    return authorize


def _declared_scope(dependant: Dependant) -> Scope | None:
    """The scope a route's :func:`scope` dependency asks for, however deep it is declared."""
    for dependency in dependant.dependencies:
        needed = getattr(dependency.call, "needed_scope", None)
        if (known := next((s for s in SCOPES if s == needed), None)) is not None:
            return known
        if (inner := _declared_scope(dependency)) is not None:
            return inner
    return None


class KeyFirstRoute(APIRoute):
    """A route that admits its key (401, 403, 429) before its body is read or its parameters parsed."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        needed = _declared_scope(self.dependant)
        if needed is None:
            return handler

        async def key_first(request: Request) -> Response:
            request.state.api_key = await admit(request, needed)
            return await handler(request)

        return key_first
