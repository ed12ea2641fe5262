"""The service under faults, through real sockets: the database unreachable (503 with Retry-After),
its connections killed as by a restart (recovered without restarting the service), an unexpected
error (500 with a request id, the worker carries on), and `episodes api --workers 2` metrics."""

from __future__ import annotations

import signal
import socket
import threading

import httpx
import psycopg
import pytest
from support.api_server import api_process, serve
from support.waiting import wait_until

from jobs.config import Settings
from jobs.db import Database
from jobs.service.keys import create_key


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_unreachable_database_answers_503_with_retry_after(settings: Settings) -> None:
    down = settings.with_(database_url=f"postgresql://nobody@127.0.0.1:{_closed_port()}/none", pool_timeout_seconds=0.5)
    with Database(down) as db, serve(db) as url:
        r = httpx.post(
            f"{url}/v1/recall",
            json={"user_id": "u", "message": "m"},
            headers={"Authorization": "Bearer ep_" + "A" * 43},
            timeout=30,
        )
        assert r.status_code == 503 and r.headers["retry-after"] == "5"
        assert r.json()["error"]["code"] == "database_unavailable"
        assert httpx.get(f"{url}/readyz", timeout=30).status_code == 503
        assert httpx.get(f"{url}/healthz").status_code == 200


def test_killed_connections_are_replaced_without_restarting(db: Database, admin_url: str) -> None:
    secret = create_key(db, "acme", ("recall",))[1]
    auth = {"Authorization": f"Bearer {secret}"}
    with serve(db) as url:
        assert httpx.get(f"{url}/v1/users/u/episodes", headers=auth).status_code == 200
        dbname = psycopg.conninfo.conninfo_to_dict(db.url)["dbname"]
        with psycopg.connect(admin_url, autocommit=True) as conn:  # what a server restart does to the pool
            killed = conn.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (dbname,),
            ).fetchone()
        assert killed and killed[0] >= 1
        statuses = [httpx.get(f"{url}/v1/users/u/episodes", headers=auth).status_code for _ in range(5)]
        assert statuses == [200] * 5


def test_an_unexpected_error_is_a_500_with_a_request_id_and_the_service_carries_on(db: Database) -> None:
    secret = create_key(db, "acme", ("recall",))[1]
    with db.admin() as conn:
        conn.execute("DROP TABLE episode_entities CASCADE")  # a fault the code does not expect
    with serve(db) as url:
        r = httpx.get(f"{url}/v1/episodes/1", headers={"Authorization": f"Bearer {secret}", "X-Request-Id": "req-7"})
        assert r.status_code == 500
        assert r.json()["error"] == {
            "code": "internal_error",
            "request_id": "req-7",
            "message": "unexpected error; quote request id req-7 when reporting it",
        }
        assert httpx.get(f"{url}/healthz").status_code == 200


@pytest.mark.slow  # two `episodes api` worker processes start and stop (~50 s)
def test_two_workers_report_metrics_for_the_whole_service(settings: Settings) -> None:
    with api_process(settings, "--workers", "2") as api:
        for _ in range(20):  # new connections, spread over both workers by the kernel
            httpx.get(f"{api.url}/healthz")
        lines = {
            line
            for line in httpx.get(f"{api.url}/metrics").text.splitlines()
            if line.startswith('episodes_http_requests_total{method="GET",route="/healthz"')
        }
        total = sum(float(line.rsplit(" ", 1)[1]) for line in lines)
        assert total >= 21  # every answered /healthz, whichever worker answered it and whichever is scraped
    # SIGTERM on leaving: uvicorn drains and stops its workers
    assert api.proc.returncode == 0, api.stderr


@pytest.mark.slow  # `episodes api` in a process of its own, a large request (~50 s)
def test_sigterm_lets_a_request_in_flight_finish(settings: Settings) -> None:
    """SIGTERM arrives while a large POST /v1/transcripts is being written (its first chunk of 250 is
    committed, the rest not yet): the request still completes, every record is stored, and the
    process exits cleanly."""
    db = Database(settings)
    secret = create_key(db, "acme", ("write",))[1]
    words = "the renewal quote for eighteen seats moves to the annual plan next month ".split()
    records = [
        {
            "user_id": f"u{i % 50}",
            "session_id": f"drain-{i}",
            "ended_at": "2025-05-01T10:00:00Z",
            "messages": [
                {
                    "role": "user" if m % 2 == 0 else "assistant",
                    "content": " ".join(words[(i + m) % 7 :]) + f" ({i}.{m})",
                }
                for m in range(40)
            ],
        }
        for i in range(1000)
    ]
    try:
        with api_process(settings) as api:
            answer: dict[str, httpx.Response] = {}
            sender = threading.Thread(
                target=lambda: answer.setdefault(
                    "r",
                    httpx.post(
                        f"{api.url}/v1/transcripts",
                        json={"transcripts": records},
                        timeout=120,
                        headers={"Authorization": f"Bearer {secret}"},
                    ),
                )
            )
            sender.start()
            with psycopg.connect(settings.database_url or "", autocommit=True) as conn:

                def stored_so_far() -> int:
                    assert sender.is_alive(), "the request ended before the first of its transcripts was seen stored"
                    row = conn.execute("SELECT count(*) FROM transcripts WHERE session_id LIKE 'drain-%'").fetchone()
                    return int(row[0]) if row else 0

                stored = wait_until(stored_so_far, 120, "the first transcripts of the request stored", every=0.002)
                api.proc.terminate()  # SIGTERM with the request in flight
                assert 0 < stored < len(records), f"the request was not in flight at SIGTERM ({stored} stored)"
                sender.join(timeout=120)
                row = conn.execute("SELECT count(*) FROM transcripts WHERE session_id LIKE 'drain-%'").fetchone()
            assert answer["r"].status_code == 200 and answer["r"].json()["accepted"] == len(records)
            assert row == (len(records),)
    finally:
        db.close()
    # One worker: uvicorn re-raises the SIGTERM once it has shut down cleanly, so whoever sent it sees
    # the process end by that signal (a supervisor of several workers exits 0 instead).
    assert api.proc.returncode == -signal.SIGTERM, api.stderr
    assert "Finished server process" in api.stderr
