"""Every error the service answers, as one JSON shape: ``{"error": {"code", "message", "field"?, "request_id"}}``.

Database outages (a refused connection, a pool that cannot hand out a connection in
``Settings.api_db_wait_seconds``, 1 s) answer 503 with ``Retry-After``, never 500: the pool checks each
connection as it is handed out, so the service recovers by itself once the database is back.

Fail fast: once a request found the database unreachable (its connection refused, or a pool that had
nothing to hand out and a fresh connection that failed too: a pool that is merely busy does not count),
the :class:`Breaker` opens and every request but ``/healthz`` answers 503 at once, without waiting on
the pool, until ``Retry-After`` has passed; then requests go to the database again.
"""

from __future__ import annotations

import logging
import math
import threading
import time

import psycopg
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from psycopg_pool import PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from jobs.errors import (
    CorrectionInvalid,
    DatabaseError,
    EpisodeNotFound,
    EpisodeNotPinnable,
    SuperSummaryNotErasable,
)

log = logging.getLogger("jobs.service")

RETRY_AFTER_OUTAGE = 5  # seconds a client waits after a 503
# What a database outage raises (a refused or lost connection, a pool with nothing to hand out):
# a 503 on the REST routes, "database unavailable" from the MCP tools.
DATABASE_OUTAGES: tuple[type[Exception], ...] = (psycopg.OperationalError, PoolTimeout, DatabaseError)


class Breaker:
    """Open for :data:`RETRY_AFTER_OUTAGE` seconds after the database was found unreachable."""

    def __init__(self, seconds: float = RETRY_AFTER_OUTAGE) -> None:
        self.seconds = seconds
        self._until = 0.0
        self._lock = threading.Lock()

    def trip(self) -> None:
        with self._lock:
            self._until = time.monotonic() + self.seconds

    def retry_after(self) -> int | None:
        """Whole seconds until requests go to the database again, or None when they go now."""
        left = self._until - time.monotonic()
        return max(1, math.ceil(left)) if left > 0 else None


def unreachable(url: str) -> bool:
    """Whether a fresh connection to ``url`` fails (a pool that timed out may only be busy)."""
    try:
        with psycopg.connect(url, connect_timeout=2, application_name="episodes api probe"):
            return False
    except psycopg.Error:
        return True


class ApiError(Exception):
    """An answer other than success, raised anywhere below a route."""

    def __init__(
        self, status: int, code: str, message: str, *, field: str | None = None, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.field, self.headers = status, code, message, field, headers


def request_id(request: Request) -> str:
    return str(getattr(request.state, "request_id", ""))


def error_response(
    request: Request,
    status: int,
    code: str,
    message: str,
    *,
    field: str | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    body: dict[str, object] = {"code": code, "message": message}
    if field is not None:
        body["field"] = field
    body["request_id"] = request_id(request)
    return JSONResponse({"error": body}, status_code=status, headers=headers)


_HTTP_CODES = {
    401: "unauthorized",
    404: "not_found",
    405: "method_not_allowed",
    408: "body_too_slow",
    413: "body_too_large",
}


def install(app: FastAPI) -> None:
    """Register the handlers that turn exceptions into the one error shape."""

    @app.exception_handler(ApiError)
    def _api(request: Request, exc: ApiError) -> JSONResponse:
        return error_response(request, exc.status, exc.code, exc.message, field=exc.field, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        first = errors[0] if errors else {"loc": (), "msg": "invalid request"}
        field = ".".join(str(part) for part in first.get("loc", ()))
        message = str(first.get("msg", "invalid request")).removeprefix("Value error, ")
        if len(errors) > 1:
            message += f" (+{len(errors) - 1} more)"
        return error_response(request, 422, "invalid_request", message, field=field or None)

    @app.exception_handler(StarletteHTTPException)
    def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return error_response(
            request,
            exc.status_code,
            _HTTP_CODES.get(exc.status_code, "http_error"),
            str(exc.detail),
            headers=dict(exc.headers) if exc.headers else None,
        )

    def _outage(request: Request, exc: Exception) -> JSONResponse:
        if not isinstance(exc, PoolTimeout) or unreachable(request.app.state.db.url):
            request.app.state.breaker.trip()
        log.warning(
            "database unavailable: %s",
            " ".join(str(exc).split())[:300],
            extra={"action": "api_db_unavailable", "request_id": request_id(request)},
        )
        return error_response(
            request,
            503,
            "database_unavailable",
            "the database is unavailable; retry after the time in Retry-After",
            headers={"Retry-After": str(RETRY_AFTER_OUTAGE)},
        )

    # The domain's refusals, raised by the functions the routes share with the CLI and the MCP tools.
    @app.exception_handler(EpisodeNotFound)
    def _not_found(request: Request, exc: EpisodeNotFound) -> JSONResponse:
        return error_response(request, 404, "not_found", str(exc))

    @app.exception_handler(CorrectionInvalid)
    def _bad_correction(request: Request, exc: CorrectionInvalid) -> JSONResponse:
        return error_response(
            request, 422, "invalid_request", str(exc), field=f"body.{exc.field}" if exc.field else None
        )

    def _conflict(request: Request, exc: Exception) -> JSONResponse:
        return error_response(request, 409, "conflict", str(exc))

    for refusal in (SuperSummaryNotErasable, EpisodeNotPinnable):
        app.add_exception_handler(refusal, _conflict)

    for kind in DATABASE_OUTAGES:
        app.add_exception_handler(kind, _outage)
