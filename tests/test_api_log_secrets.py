"""No secret in any log line (issue 35, item 7): `episodes api` as its own process, logging everything
(EPISODES_LOG_LEVEL=DEBUG, JSON lines), is sent representative requests carrying a known API key, a memory
page link (its token in the address and in forms), MCP calls, a refused key, and a database outage;
its whole stderr must hold neither the key, the token, the link secret nor the database password.

The logging calls of jobs/ were read for the same (access log: method, route template, status, tenant;
never a path's query string or a header; database errors: libpq's text, which names no password, and
locations through jobs.db._redact_url). None was found to leak today: this test keeps it so."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlsplit

import httpx
import psycopg
import pytest
from support.api_server import api_process

from jobs import config
from jobs.db import Database
from jobs.formats.records import from_objects
from jobs.ingest import ingest_records
from jobs.service.keys import create_key

PASSWORD = "Pw-0f-the-database-9d41c7"
SSL_PASSWORD = "Ssl-key-passphrase-5e82"  # libpq's sslpassword (issue 46 #9): unused without a client key, never shown
LINK_SECRET = "link-secret-" + "7" * 40
MARIA = {
    "user_id": "u-maria",
    "session_id": "m1",
    "started_at": "2025-01-21T10:00:00Z",
    "ended_at": "2025-01-21T10:20:00Z",
    "messages": [
        {"role": "user", "content": "We decided to go with the Business plan at $69 per seat."},
        {"role": "assistant", "content": "Noted."},
    ],
}


def test_no_log_line_holds_a_key_token_secret_or_password(
    db_url: str, admin_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # trust on the socket: the password is accepted, not needed; sslpassword is read only with an encrypted client key
    url = psycopg.conninfo.make_conninfo(db_url, password=PASSWORD, sslpassword=SSL_PASSWORD)
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("EPISODES_LOG_LEVEL", "DEBUG")
    monkeypatch.setenv("EPISODES_LOG_FORMAT", "json")
    monkeypatch.setenv("EPISODES_LINK_SECRET", LINK_SECRET)
    settings = config.load()
    with Database(settings) as db:
        assert not ingest_records(
            db, from_objects([MARIA], settings.max_transcript_bytes), tenant_id="acme", only_tenant=True
        ).rejected
        key = create_key(db, "acme", ("recall", "ingest", "edit", "export"))[1]
    auth = {"Authorization": f"Bearer {key}"}
    mcp = {**auth, "X-Episodes-User": "u-maria", "Accept": "application/json, text/event-stream"}
    dbname = psycopg.conninfo.conninfo_to_dict(db_url)["dbname"]
    with api_process(settings) as api, httpx.Client(base_url=api.url, timeout=60) as c:
        assert c.post("/v1/recall", headers=auth, json={"user_id": "u-maria", "message": "pricing"}).status_code == 200
        assert c.get("/v1/users/u-maria/export", headers=auth).status_code == 200
        assert (
            c.post("/v1/transcripts", headers=auth, json={"transcripts": [{**MARIA, "session_id": "m2"}]}).status_code
            == 200
        )
        link = c.post("/v1/users/u-maria/memory-link", headers=auth).json()["url"]
        token = parse_qs(urlsplit(link).query)["token"][0]
        assert c.get("/memory", params={"token": token}).status_code == 200
        assert c.post(
            "/memory/correct", params={"token": token}, data={"token": token, "episode_id": "999", "summary": "x"}
        ).status_code in (404, 422)
        assert c.get("/memory", params={"token": token[:-3] + "AAA"}).status_code == 403
        assert (
            c.post(
                "/mcp",
                headers=mcp,
                json={
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "tools/call",
                    "params": {"name": "recall_memory", "arguments": {"message": "pricing"}},
                },
            ).status_code
            == 200
        )
        assert (
            c.get("/v1/users/u-maria/episodes", headers={"Authorization": f"Bearer {key[:-4]}AAAA"}).status_code == 401
        )
        assert c.get("/v1/users/u-maria/episodes", params={"api_key": key}).status_code == 401
        with psycopg.connect(admin_url, autocommit=True) as conn:  # an outage: what the pool and probe log
            conn.execute(f'ALTER DATABASE "{dbname}" ALLOW_CONNECTIONS false')
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (dbname,))
        try:
            assert c.get("/v1/users/u-maria/episodes", headers=auth).status_code == 503
            assert (
                c.post("/mcp", headers=mcp, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).status_code == 503
            )
        finally:
            with psycopg.connect(admin_url, autocommit=True) as conn:
                conn.execute(f'ALTER DATABASE "{dbname}" ALLOW_CONNECTIONS true')
    lines = [line for line in api.stderr.splitlines() if line.strip()]
    records = [json.loads(line) for line in lines if line.startswith("{")]
    assert {r["action"] for r in records} >= {"api_ready", "api_request", "api_db_unavailable"}, api.stderr[-3000:]
    secrets = {
        "API key": key,
        "API key body": key[3:],
        "link token": token,
        "link signature": token.split(".")[1],
        "link secret": LINK_SECRET,
        "database password": PASSWORD,
        "client key passphrase": SSL_PASSWORD,
    }
    leaks = {name: [line for line in lines if value in line] for name, value in secrets.items()}
    assert leaks == {name: [] for name in secrets}
