"""`episodes api` as its own process, at its limits (issue 35): a port in use is said in one line before
anything says "listening", and "listening" is said only once it is (issue 46, finding 19); connections that send their headers slowly, or nothing, are closed; with the
database gone, requests answer 503 with Retry-After at once instead of waiting out the pool."""

from __future__ import annotations

import os
import select
import socket
import subprocess
import sys

import httpx
import psycopg
import pytest
from support.api_server import api_process
from support.waiting import wait_until

from jobs.config import Settings
from jobs.db import Database
from jobs.service.keys import create_key


def test_a_port_in_use_is_one_line_and_exit_1(settings: Settings) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {**os.environ, "DATABASE_URL": settings.database_url or ""}
        done = subprocess.run(
            [sys.executable, "-m", "jobs.cli", "api", "--port", str(port)],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines()[-1] == f"episodes: port {port} is in use; choose another with --port"
    assert "listening" not in done.stderr and "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize("workers", [1, 2])
def test_listening_is_said_only_once_connections_are_taken(settings: Settings, workers: int) -> None:
    """The moment `episodes api` says "listening", a connection is taken and /healthz answers. It used to
    say so before the app had started: connections were refused for the next 1-5 s."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "DATABASE_URL": settings.database_url or ""}
    proc = subprocess.Popen(
        [sys.executable, "-m", "jobs.cli", "api", "--port", str(port), "--workers", str(workers)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    err = proc.stderr
    said = bytearray()
    try:

        def banner() -> bool:
            assert proc.poll() is None, f"`episodes api` ended before it said listening: {said.decode()}"
            while select.select([err], [], [], 0)[0]:
                chunk = os.read(err.fileno(), 65536)
                if not chunk:
                    break
                said.extend(chunk)
            return b"listening on" in said

        wait_until(banner, 120, "`episodes api` to say it is listening", every=0.05)
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:  # refused: raises here
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert sock.recv(65536).startswith(b"HTTP/1.1 200"), said.decode()
    finally:
        proc.terminate()
        proc.communicate(timeout=60)
    assert f"listening on http://127.0.0.1:{port} ({workers} worker".encode() in said, said.decode()
    assert said.count(b"listening on") == 1, said.decode()


def _closed(sock: socket.socket) -> bool:
    """Whether the server closed ``sock`` (anything it sent before that is read and dropped)."""
    while select.select([sock], [], [], 0)[0]:
        try:
            if not sock.recv(65536):
                return True
        except ConnectionResetError:
            return True
    return False


def test_slow_and_idle_connections_are_closed(settings: Settings) -> None:
    """Three clients the defaults (10 s for headers, 5 s kept alive) must cut off: one that connects and says
    nothing, one that sends a header line every half second and never ends its headers, and one that asks
    once, keeps the connection and then trickles its next request the same way. uvicorn alone closes none
    of them: its keep-alive timer restarts on every byte, and a new connection has none. One that asks
    properly is answered."""
    with api_process(settings) as api:
        port = int(api.url.rsplit(":", 1)[1])
        silent, trickling, kept = (socket.create_connection(("127.0.0.1", port)) for _ in range(3))
        kept.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            answer += kept.recv(65536)
        assert answer.startswith(b"HTTP/1.1 200")
        for sock in (trickling, kept):
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        open_ones = {"silent": silent, "trickling": trickling, "kept": kept}

        def all_closed() -> bool:
            for name, sock in list(open_ones.items()):
                if _closed(sock):
                    del open_ones[name]
                elif name != "silent":
                    try:
                        sock.sendall(b"X-Slow: 1\r\n")
                    except OSError:
                        del open_ones[name]
            return not open_ones

        try:  # a minute at most; the header timeout is 10 s
            wait_until(
                all_closed, 60, "the server to close the silent, the trickling and the kept connection", every=0.5
            )
        finally:
            for sock in (silent, trickling, kept):
                sock.close()
        assert httpx.get(f"{api.url}/healthz").status_code == 200


def test_a_database_gone_answers_503_at_once(settings: Settings, db: Database, admin_url: str) -> None:
    """The database stops taking connections while the service runs: a request answers 503 with
    Retry-After well inside the pool's 10 s (the service waits EPISODES' api_db_wait_seconds, 1 s, and then,
    the database found unreachable, answers the next ones without waiting); once the database is back, the
    service serves again by itself."""
    secret = create_key(db, "acme", ("recall",))[1]
    auth = {"Authorization": f"Bearer {secret}"}
    dbname = psycopg.conninfo.conninfo_to_dict(settings.database_url or "")["dbname"]
    with api_process(settings) as api:
        assert httpx.get(f"{api.url}/v1/users/u/episodes", headers=auth).status_code == 200
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'ALTER DATABASE "{dbname}" ALLOW_CONNECTIONS false')
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (dbname,))
        try:
            for _ in range(3):  # the client gives up at 5 s: the pool's own timeout (10 s) would never answer
                r = httpx.get(f"{api.url}/v1/users/u/episodes", headers=auth, timeout=5)
                assert r.status_code == 503 and int(r.headers["retry-after"]) >= 1, r.text
                assert r.json()["error"]["code"] == "database_unavailable"
            assert httpx.get(f"{api.url}/healthz").status_code == 200
        finally:
            with psycopg.connect(admin_url, autocommit=True) as conn:
                conn.execute(f'ALTER DATABASE "{dbname}" ALLOW_CONNECTIONS true')
        wait_until(  # back within Retry-After (5 s) and a connection
            lambda: httpx.get(f"{api.url}/v1/users/u/episodes", headers=auth, timeout=30).status_code == 200,
            60,
            "the service to answer 200 again after the database came back",
            every=0.5,
        )


def test_a_busy_pool_is_not_taken_for_a_database_gone(settings: Settings) -> None:
    """Every connection of the pool in use: that request answers 503 after its wait, but the database still
    takes a fresh connection, so the next requests are not refused without trying (the breaker stays shut)."""
    from support.api_server import serve

    with Database(settings.with_(pool_size=1, pool_timeout_seconds=0.5)) as db, serve(db) as url:
        secret = create_key(db, "acme", ("recall",))[1]
        auth = {"Authorization": f"Bearer {secret}"}
        assert httpx.get(f"{url}/v1/users/u/episodes", headers=auth, timeout=30).status_code == 200
        with db.pool.connection():  # the only connection, held
            busy = httpx.get(f"{url}/v1/users/u/episodes", headers=auth, timeout=30)
        assert busy.status_code == 503, busy.text
        assert httpx.get(f"{url}/v1/users/u/episodes", headers=auth, timeout=30).status_code == 200
