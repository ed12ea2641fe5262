"""The ASGI application of `episodes api`: FastAPI on uvicorn.

Why FastAPI: its request validation, its 422 errors with field paths and its OpenAPI document
(``/openapi.json``) all come from the same pydantic models the rest of the code validates with,
so the document cannot drift from what the service accepts; schemathesis fuzzes that document in
the tests. Endpoints are plain ``def``: the database layer is sync psycopg with a pool, and
Starlette runs each in its thread pool.

Routes live in :mod:`jobs.service.routes`, one module per resource, each exporting ``router``;
adding one is one line in :data:`ROUTERS`.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from jobs import config, logs, migrate
from jobs.db import Database, one
from jobs.embeddings import embedder_for
from jobs.recall.shared import shared_recaller
from jobs.service import errors, mcp_http, page_routes
from jobs.service.auth import RateLimiter
from jobs.service.keys import KeyVerifier
from jobs.service.metrics import Metrics, mark_dead
from jobs.service.middleware import RequestMiddleware
from jobs.service.routes import claude_code, control, episodes, health, recall, transcripts, users
from jobs.sql import query

log = logging.getLogger("jobs.service")

ROUTERS = [
    health.router,
    recall.router,
    claude_code.router,
    transcripts.router,
    episodes.router,
    control.router,
    users.router,
    page_routes.router,
]


def from_environment() -> FastAPI:
    """The app of `episodes api`, built in each worker process from the environment's settings."""
    settings = config.load()
    logs.setup(settings.log_format, settings.log_level)
    # Its login role (jobs.db); a request waits api_db_wait_seconds for a connection, not the CLI's pool timeout.
    service = settings.with_(pool_timeout_seconds=settings.api_db_wait_seconds)
    app = create_app(Database.for_service(service, "episodes api"), close_db=True)
    # The worker process is the service's alone, and what is alive now (modules, the app) lives as long
    # as it does: take it out of the cyclic collector's full passes, each of which stopped the worker
    # to scan these ~180,000 objects again (see episodes_gc_pause_seconds; bench/README.md).
    gc.collect()  # garbage already made is freed, not frozen
    gc.freeze()
    return app


def create_app(db: Database, *, close_db: bool = False) -> FastAPI:
    """The service over ``db``, whose pool every request shares (closed at shutdown with ``close_db``)."""
    settings = db.settings

    def queue_depth() -> int:
        with db.login() as conn:
            return int(one(conn.execute(query("service_queue_depth")))["n"])

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        embedder_for(settings).embed(["warm up"])  # load the weights before the first recall, not during it
        metrics.watch_gc()
        log.info("memory service ready", extra={"action": "api_ready", "schema": migrate.code_version()})
        async with app.state.mcp.run():  # the MCP transport's task group (jobs/service/mcp_http.py)
            yield
        metrics.unwatch_gc()
        mark_dead()
        if close_db:
            db.close()

    app = FastAPI(
        title="episodes memory service",
        version="1",
        lifespan=lifespan,
        description="Long-term episodic memory for AI agents: recall, transcripts, episodes, events.",
    )
    app.state.db = db
    app.state.settings = settings
    app.state.verifier = KeyVerifier(db, settings.api_key_cache_seconds)
    app.state.limiter = RateLimiter(settings.api_rate_limit)
    app.state.recaller = shared_recaller(db)
    app.state.metrics = metrics = Metrics(queue_depth)
    app.state.mcp = mcp_http.mount(app, db, app.state.recaller, settings.api_max_body)
    app.state.breaker = breaker = errors.Breaker()
    errors.install(app)
    for router in ROUTERS:
        app.include_router(router)
    app.add_middleware(
        RequestMiddleware,
        max_body=settings.api_max_body,
        metrics=metrics,
        breaker=breaker,
        body_timeout=settings.api_body_timeout_seconds,
    )
    return app
