"""A real `episodes api` for tests: uvicorn on a free local port in a thread, over a real database."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import uvicorn
from conftest import _url_for

from jobs.config import Settings
from jobs.db import Database
from jobs.service.app import create_app


@contextmanager
def serve(db: Database) -> Iterator[str]:
    """The service over ``db`` listening on 127.0.0.1; yields its base URL; drains and stops on exit."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(db), log_config=None, access_log=False, lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test API server did not start")
        time.sleep(0.02)
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
    db = Database(Settings(database_url=_url_for(admin_url, name), **settings))
    try:
        yield db
    finally:
        db.close()
        close_recallers()
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
