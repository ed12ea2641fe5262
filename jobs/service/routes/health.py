"""Liveness, readiness and metrics, for load balancers and Prometheus. ``/healthz`` is always open and
touches no database (its ``schema_version`` is the one the code needs); ``/readyz`` and ``/metrics``
(which read the database, across tenants) are open unless ``EPISODES_METRICS_TOKEN`` is set, and then
need it as the bearer token."""

from __future__ import annotations

from functools import cache

from fastapi import APIRouter, Depends, Request, Response

from jobs import migrate
from jobs.service.auth import operator
from jobs.service.errors import ApiError
from jobs.service.schemas import Health

router = APIRouter(tags=["operations"])


@router.get("/healthz", response_model=Health)
def healthz() -> Health:
    """The process answers (it does not touch the database), with the schema version its code needs;
    ``/readyz`` says whether the database is at it."""
    return Health(status="ok", schema_version=_code_version())


@cache
def _code_version() -> int:
    """Read once from the migrations shipped with the code: a health check is asked for every few seconds."""
    return migrate.code_version()


@router.get(
    "/readyz",
    response_model=Health,
    dependencies=[Depends(operator)],
    responses={503: {"description": "database unreachable or schema not current"}},
)
def readyz(request: Request) -> Health:
    """The database answers and its schema is the one this code needs."""
    with request.app.state.db.admin() as conn:
        have = migrate.current_version(conn)
    if have != migrate.code_version():
        raise ApiError(
            503,
            "schema_not_current",
            f"the database schema is at version {have}; this code needs {migrate.code_version()} (run `episodes init`)",
            headers={"Retry-After": "30"},
        )
    return Health(status="ok", schema_version=have)


@router.get("/metrics", response_class=Response, dependencies=[Depends(operator)])
def metrics(request: Request) -> Response:
    """Prometheus text format."""
    metrics = request.app.state.metrics
    body, content_type = metrics.render()
    return Response(body, media_type=content_type)
