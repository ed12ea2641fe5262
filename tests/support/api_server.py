"""A real `episodes api` for tests: uvicorn on a free local port in a thread (serve), or the command as
its own process (api_process), over a real database."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import psycopg
import pytest
import uvicorn
from conftest import BACKENDS as BACKENDS  # re-exported: the service tests take it from here

from jobs.config import Settings
from jobs.db import Database
from jobs.service.app import create_app
from jobs.service.auth import RateLimiter
from support.databases import url_for
from support.waiting import wait_until


@contextmanager
def serve(db: Database, *, rate_limited: bool = False) -> Iterator[str]:
    """The service over ``db`` listening on 127.0.0.1; yields its base URL; drains and stops on exit.

    Test clients ask faster than the default per-key rate (EPISODES_API_RATE_LIMIT, 20/s), so keys
    without a rate of their own are not limited here unless ``rate_limited``; a key's own
    ``rate_limit`` always applies."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    app = create_app(db)
    if not rate_limited:
        app.state.limiter = RateLimiter(None)
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False, lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()

    def started() -> bool:
        assert thread.is_alive(), "the test API server's thread ended before it started serving"
        return bool(server.started)

    wait_until(started, 30, "the test API server to start")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


@contextmanager
def scratch_database(admin_url: str, template_db: str, name: str, **settings: Any) -> Iterator[Database]:
    """A database of its own, copied from the migrated template, for a module that starts a service:
    yields a Database with ``settings`` (a Settings' fields) over it; closes it, drops the process's
    recall copies of it and drops it on exit."""
    from jobs.recall import close_recallers

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
    db = Database(Settings(database_url=url_for(admin_url, name), **settings))
    try:
        yield db
    finally:
        db.close()
        close_recallers()
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# BACKENDS (conftest): params of a module fixture that runs its module on both; the Citus run is slow.


@contextmanager
def backend_database(request: pytest.FixtureRequest, name: str, **settings: Any) -> Iterator[Database]:
    """A database for a module that starts a service, on the module fixture's backend (``request.param``,
    one of BACKENDS): "single" is :func:`scratch_database` of the template; "citus" is this process's
    database on the cluster (conftest ``citus_url``), emptied first. Yields a Database with ``settings``;
    on exit closes it and drops the process's recall copies of it."""
    if request.param != "citus":
        with scratch_database(
            request.getfixturevalue("admin_url"), request.getfixturevalue("template_db"), name, **settings
        ) as db:
            yield db
        return
    from jobs.recall import close_recallers
    from support import citus_cluster

    url = request.getfixturevalue("citus_url")
    citus_cluster.empty(url)
    db = Database(Settings(database_url=url, **settings))
    try:
        yield db
    finally:
        db.close()
        close_recallers()


@dataclass
class ApiProcess:
    """`episodes api` as its own process: its URL, the process, and its stderr once it has ended."""

    url: str
    proc: subprocess.Popen[bytes]
    stderr: str = ""


@contextmanager
def api_process(settings: Settings, *args: str) -> Iterator[ApiProcess]:
    """`python -m jobs.cli api --port P *args` over ``settings``' database, started and answering
    /healthz; on exit SIGTERM if it still runs, and its stderr collected (the caller checks the end)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "DATABASE_URL": settings.database_url or ""}
    proc = subprocess.Popen(
        [sys.executable, "-m", "jobs.cli", "api", "--port", str(port), *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    found = ApiProcess(f"http://127.0.0.1:{port}", proc)
    try:

        def healthy() -> bool:
            assert proc.poll() is None, "the service ended before it answered /healthz"
            try:
                return httpx.get(f"{found.url}/healthz").status_code == 200
            except httpx.TransportError:
                return False

        wait_until(healthy, 120, "`episodes api` to answer /healthz with 200", every=0.2)
        yield found
    finally:
        if proc.poll() is None:
            proc.terminate()
        found.stderr = proc.communicate(timeout=60)[1].decode()
