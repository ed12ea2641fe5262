"""`episodes api` hardened (issue 29): links built from a configured public URL (never the Host header)
and dying with their key and with the user's erasure; the key checked before the body is read; a key
cache that unknown keys cannot flush; a default per-key rate; /metrics and /readyz behind a token;
no-store and nosniff on everything personal; forged cursors and unknown event types refused; scopes
that mean what their help says. Through real sockets, on one PostgreSQL and on the Citus cluster."""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import psycopg
import pytest
from support.api_server import backend_database, serve

from jobs import config, migrate
from jobs.concepts import EVENT_TYPES
from jobs.db import Database, one
from jobs.embeddings import Embedder
from jobs.errors import ConfigError
from jobs.rights.forget import forget_user
from jobs.service.keys import KeyVerifier, create_key, parse_scopes, revoke_key

MARIA = {
    "user_id": "u-maria",
    "session_id": "m1",
    "started_at": "2025-01-21T10:00:00Z",
    "ended_at": "2025-01-21T10:20:00Z",
    "messages": [
        {"role": "user", "content": "We decided to go with the Business plan at $69 per seat for pricing."},
        {"role": "assistant", "content": "Noted. I'll send the renewal order form by Friday."},
    ],
}
METRICS_TOKEN = "m" * 40
PUBLIC = "https://memory.example.com/episodes"

# The service's hardening is Python: runs on one PostgreSQL only (tests/test_api_service.py runs every route on Citus).


@dataclass
class Api:
    url: str  # the service with neither a public URL nor a metrics token
    closed_url: str  # the same database, served with EPISODES_PUBLIC_URL and EPISODES_METRICS_TOKEN set
    db: Database
    keys: dict[str, str]

    def client(self, key: str | None = None, url: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.keys[key]}"} if key else {}
        return httpx.Client(base_url=url or self.url, headers=headers, timeout=60)


@pytest.fixture(scope="module", params=["single"])
def api(request: pytest.FixtureRequest, embedder: Embedder, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    from jobs.extract.offline import OfflineExtractor
    from jobs.summarize import run_summarize

    with backend_database(
        request,
        f"hard_{os.getpid()}_{Path(__file__).stem}",
        home=tmp_path_factory.mktemp("home"),
        api_key_cache_seconds=0.0,
        api_max_body=64 * 1024,
        extractor="offline",
    ) as db:
        keys = {
            label: create_key(db, "acme", scopes, name=label)[1]
            for label, scopes in [
                ("all", ("recall", "ingest", "edit", "admin")),
                ("reader", ("recall",)),
                ("ingest", ("ingest",)),
                ("edit", ("recall", "edit")),
                ("legacy", ("recall", "write")),
            ]
        }
        closed = Database(db.settings.with_(public_url=PUBLIC, metrics_token=METRICS_TOKEN))
        try:
            with serve(db) as url, serve(closed) as closed_url:
                found = Api(url, closed_url, db, keys)
                with found.client("all") as c:
                    assert c.post("/v1/transcripts", json={"transcripts": [MARIA]}).status_code == 200
                run_summarize(db, extractor=OfflineExtractor(embedder), embedder=embedder)
                yield found
        finally:
            closed.close()


def _token(url: str) -> str:
    return parse_qs(urlsplit(url).query)["token"][0]


# --- 1. links: a configured public URL, never the Host header -----------------------------------


def test_a_link_never_takes_its_host_from_the_request(api: Api) -> None:
    with api.client("edit") as c:
        r = c.post("/v1/users/u-maria/memory-link", headers={"Host": "evil.example"})
    assert r.status_code == 200, r.text
    url = r.json()["url"]
    assert "evil.example" not in url and url.startswith("/memory?token=")  # relative without EPISODES_PUBLIC_URL
    assert httpx.get(api.url + url, timeout=60).status_code == 200
    with api.client("edit", url=api.closed_url) as c:
        r = c.post(
            "/v1/users/u-maria/memory-link", headers={"Host": "evil.example", "X-Forwarded-Host": "evil.example"}
        )
    assert r.json()["url"].startswith(f"{PUBLIC}/memory?token="), r.text


def test_the_public_url_setting_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EPISODES_PUBLIC_URL", "https://memory.example.com/base/")
    assert config.load().public_url == "https://memory.example.com/base"
    for bad in (
        "memory.example.com",
        "ftp://memory.example.com",
        "https://memory.example.com/?x=1",
        "https://memory.example.com/#top",
        "https://",
    ):
        monkeypatch.setenv("EPISODES_PUBLIC_URL", bad)
        with pytest.raises(ConfigError, match="EPISODES_PUBLIC_URL"):
            config.load()


# --- 2. links die with their key and with the user's erasure ------------------------------------


def test_a_link_dies_with_the_key_that_issued_it(api: Api) -> None:
    key, secret = create_key(api.db, "acme", ("recall", "edit"), name="short-lived")
    r = httpx.post(f"{api.url}/v1/users/u-maria/memory-link", headers={"Authorization": f"Bearer {secret}"})
    token = _token(r.json()["url"])
    assert httpx.get(f"{api.url}/memory", params={"token": token}).status_code == 200
    revoke_key(api.db, key.prefix)
    page = httpx.get(f"{api.url}/memory", params={"token": token})
    assert page.status_code == 410 and "no longer works" in page.text and "Business plan" not in page.text
    with api.db.admin() as conn:
        ep = one(conn.execute("SELECT id, summary FROM episodes WHERE user_id = 'u-maria'"))
    r = httpx.post(
        f"{api.url}/memory/correct",
        params={"token": token},
        data={"episode_id": ep["id"], "summary": "Rewritten after the key was revoked."},
    )
    assert r.status_code == 410
    with api.db.admin() as conn:
        assert conn.execute("SELECT summary FROM episodes WHERE id = %s", (ep["id"],)).fetchone() == {
            "summary": ep["summary"]
        }


def test_a_link_dies_with_the_users_erasure(api: Api) -> None:
    record = {**MARIA, "user_id": "u-erased", "session_id": "e1"}
    with api.client("all") as c:
        assert c.post("/v1/transcripts", json={"transcripts": [record]}).status_code == 200
        token = _token(c.post("/v1/users/u-erased/memory-link").json()["url"])
    assert httpx.get(f"{api.url}/memory", params={"token": token}).status_code == 200
    forget_user(api.db, "acme", "u-erased")
    with api.client("all") as c:  # the host goes on sending the user's sessions after the erasure
        assert c.post("/v1/transcripts", json={"transcripts": [{**record, "session_id": "e2"}]}).status_code == 200
    page = httpx.get(f"{api.url}/memory", params={"token": token})
    assert page.status_code == 410 and "no longer works" in page.text
    assert "remember" not in page.text.split("</h1>", 1)[1]  # not even "we do not remember any conversations"


def test_links_without_a_key_id_are_refused(api: Api) -> None:
    """A token of the earlier shape ([tenant, user, expiry], no key) signed with the real secret."""
    from jobs.service.page_link import _b64, _mac, link_secret

    expires = int((dt.datetime.now(dt.UTC) + dt.timedelta(minutes=10)).timestamp())
    payload = _b64(json.dumps(["acme", "u-maria", expires], separators=(",", ":")).encode())
    token = f"{payload}.{_b64(_mac(link_secret(api.db), payload))}"
    assert httpx.get(f"{api.url}/memory", params={"token": token}).status_code == 403


# --- 3. the key before the body ------------------------------------------------------------------


def test_an_unauthenticated_large_body_is_refused_401_before_it_is_read(api: Api) -> None:
    big = b'{"transcripts": [' + b" " * (6 * 1024 * 1024) + b"]}"
    for headers in ({}, {"Authorization": "Bearer ep_" + "A" * 43}, {"Authorization": "Basic dXNlcjpwdw=="}):
        for path in ("/v1/transcripts", "/mcp"):
            r = httpx.post(
                f"{api.url}{path}", content=big, timeout=60, headers={**headers, "content-type": "application/json"}
            )
            assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer", (path, headers, r.text)
    with api.client("all") as c:  # a genuine key still meets the body limit
        r = c.post("/v1/transcripts", content=big, headers={"content-type": "application/json"})
    assert r.status_code == 413 and r.json()["error"]["code"] == "body_too_large"
    with api.client("reader") as c:  # and a key without the scope is refused before its body too
        r = c.post("/v1/transcripts", content=big, headers={"content-type": "application/json"})
    assert r.status_code == 403


# --- 4. the key cache ----------------------------------------------------------------------------


def test_unknown_keys_never_evict_a_valid_one(db: Database) -> None:
    secret = create_key(db, "acme", ("recall",))[1]
    verifier = KeyVerifier(db, ttl=60.0)
    verifier.MAX_NEGATIVE = 50  # a small bound, so the test floods it quickly
    assert verifier.verify(secret) is not None
    for i in range(120):
        assert verifier.verify(f"ep_{i:043d}") is None
    known, key = verifier.cached(secret)
    assert known and key is not None and key.tenant_id == "acme"
    assert len(verifier._negative) <= 50


def test_malformed_keys_never_reach_the_database(db: Database) -> None:
    verifier = KeyVerifier(db, ttl=60.0)
    for bad in ("ep_short", "ep_" + "A" * 42 + "!", "ep_" + "A" * 44, "xx_" + "A" * 43, "ep_" + "A" * 43 + "\n"):
        assert verifier.cached(bad) == (True, None), bad
    assert verifier.cached("ep_" + "A" * 43) == (False, None)  # well-formed: only the database can say


# --- 5. a default per-key rate -------------------------------------------------------------------


def test_a_default_rate_limit_applies_to_keys_without_their_own(monkeypatch: pytest.MonkeyPatch) -> None:
    assert config.load().api_rate_limit == 20.0
    monkeypatch.setenv("EPISODES_API_RATE_LIMIT", "off")
    assert config.load().api_rate_limit is None
    monkeypatch.setenv("EPISODES_API_RATE_LIMIT", "5")
    assert config.load().api_rate_limit == 5.0


def test_the_default_rate_answers_429(settings: config.Settings) -> None:
    with Database(settings.with_(api_rate_limit=2.0)) as db:
        secret = create_key(db, "acme", ("recall",))[1]
        with (
            serve(db, rate_limited=True) as url,
            httpx.Client(base_url=url, headers={"Authorization": f"Bearer {secret}"}) as c,
        ):
            statuses = [c.get("/v1/users/u/episodes").status_code for _ in range(4)]
    assert statuses[:2] == [200, 200] and statuses[-1] == 429, statuses


# --- 6. /metrics and /readyz behind a token ------------------------------------------------------


def test_metrics_and_readiness_can_be_closed_with_a_token(api: Api) -> None:
    for path in ("/metrics", "/readyz"):
        assert httpx.get(api.closed_url + path).status_code == 401
        assert httpx.get(api.closed_url + path, headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert (
            httpx.get(api.closed_url + path, headers={"Authorization": f"Bearer {api.keys['all']}"}).status_code == 401
        )
        assert httpx.get(api.closed_url + path, headers={"Authorization": f"Bearer {METRICS_TOKEN}"}).status_code == 200
    assert httpx.get(api.closed_url + "/healthz").json() == {"status": "ok", "schema_version": migrate.code_version()}
    assert httpx.get(api.url + "/metrics").status_code == 200  # unset: open, as before


def test_the_metrics_token_setting_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    assert config.load().metrics_token is None
    monkeypatch.setenv("EPISODES_METRICS_TOKEN", "short")
    with pytest.raises(ConfigError, match="EPISODES_METRICS_TOKEN"):
        config.load()
    monkeypatch.setenv("EPISODES_METRICS_TOKEN", METRICS_TOKEN)
    assert config.load().metrics_token == METRICS_TOKEN


# --- 7. no-store, nosniff ------------------------------------------------------------------------


def test_personal_answers_are_never_stored_or_sniffed(api: Api) -> None:
    with api.client("all") as c:
        answers = [
            c.get("/v1/users/u-maria/export"),
            c.get("/v1/users/u-maria/episodes"),
            c.post("/v1/recall", json={"user_id": "u-maria", "message": "pricing"}),
            c.get("/v1/events", params={"type": "nonsense"}),
            c.get("/v1/episodes/999999"),
        ]
        token = _token(c.post("/v1/users/u-maria/memory-link").json()["url"])
    answers += [
        httpx.get(f"{api.url}/v1/users/u-maria/export"),
        httpx.get(f"{api.url}/memory", params={"token": token}),
        httpx.post(f"{api.url}/memory/item", params={"token": token}, data={"event_id": "0", "action": "done"}),
    ]
    for r in answers:
        assert r.headers.get("cache-control") == "no-store", (r.request.url, r.status_code, r.headers)
        assert r.headers.get("x-content-type-options") == "nosniff", (r.request.url, r.headers)


# --- 8. cursors and query parameters -------------------------------------------------------------


def _cursor(moment: str, row_id: object) -> str:
    return base64.urlsafe_b64encode(json.dumps([moment, row_id]).encode()).decode().rstrip("=")


def test_forged_cursors_answer_400_saying_what_to_do(api: Api) -> None:
    forged = [
        _cursor("2025-01-01T00:00:00+00:00", 2**70),
        _cursor("2025-01-01T00:00:00+00:00", -1),
        _cursor("2025-01-01T00:00:00+00:00", True),
        _cursor("2025-01-01T00:00:00", 1),
        "garbage",
        "e30",
    ]
    with api.client("all") as c:
        for cursor in forged:
            for path in ("/v1/users/u-maria/episodes", "/v1/events"):
                r = c.get(path, params={"cursor": cursor})
                assert r.status_code == 400, (path, cursor, r.text)
                error = r.json()["error"]
                assert error["field"] == "query.cursor" and "without it" in error["message"]


def test_an_unknown_event_type_is_a_422_naming_the_allowed_ones(api: Api) -> None:
    with api.client("all") as c:
        r = c.get("/v1/events", params={"type": "decisions"})
        assert r.status_code == 422 and r.json()["error"]["field"] == "query.type"
        for allowed in EVENT_TYPES:
            assert allowed in r.json()["error"]["message"]
        assert c.get("/v1/events", params={"type": "decision"}).status_code == 200


# --- 9. scopes -----------------------------------------------------------------------------------


def test_ingest_and_edit_are_separate_scopes(api: Api) -> None:
    with api.db.admin() as conn:
        episode_id = one(conn.execute("SELECT id FROM episodes WHERE user_id = 'u-maria' LIMIT 1"))["id"]
    record = {**MARIA, "session_id": "s-scope"}
    with api.client("ingest") as ingest:
        assert ingest.post("/v1/transcripts", json={"transcripts": [record]}).status_code == 200
        for r in (
            ingest.patch(f"/v1/episodes/{episode_id}", json={"summary": "x" * 20}),
            ingest.delete(f"/v1/episodes/{episode_id}", params={"dry_run": True}),
            ingest.put(f"/v1/episodes/{episode_id}/pin"),
            ingest.delete(f"/v1/episodes/{episode_id}/pin"),
            ingest.post("/v1/users/u-maria/memory-link"),
        ):
            assert r.status_code == 403 and "'edit'" in r.json()["error"]["message"], r.text
    with api.client("edit") as edit:
        r = edit.post("/v1/transcripts", json={"transcripts": [record]})
        assert r.status_code == 403 and "'ingest'" in r.json()["error"]["message"]
        assert edit.delete(f"/v1/episodes/{episode_id}", params={"dry_run": True}).status_code == 200
        assert edit.put(f"/v1/episodes/{episode_id}/pin").status_code == 200
        assert edit.delete(f"/v1/episodes/{episode_id}/pin").status_code == 200
    with api.client("legacy") as legacy:  # `write`: ingest and edit, as before
        assert legacy.post("/v1/transcripts", json={"transcripts": [record]}).status_code == 200
        assert legacy.delete(f"/v1/episodes/{episode_id}", params={"dry_run": True}).status_code == 200


def test_scopes_parse_with_write_as_ingest_and_edit() -> None:
    assert parse_scopes("recall,ingest") == ("recall", "ingest")
    assert parse_scopes("edit") == ("edit",)
    assert parse_scopes("recall,write") == ("recall", "write")
    with pytest.raises(ValueError, match="unknown scope delete"):
        parse_scopes("recall,delete")


def test_the_migration_keeps_write_keys_and_allows_the_new_scopes(blank_db_url: str) -> None:
    with psycopg.connect(blank_db_url) as conn:
        migrate.migrate(conn, embedding_dim=384, embedder="test")
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute(
                "INSERT INTO api_keys (prefix, key_hash, tenant_id, scopes) "
                "VALUES ('ep_AAAAAAAA', sha256('x'), 'acme', ARRAY['recall', 'delete'])"
            )
        conn.execute(
            "INSERT INTO api_keys (prefix, key_hash, tenant_id, scopes) VALUES "
            "('ep_BBBBBBBB', sha256('y'), 'acme', ARRAY['ingest', 'edit']), "
            "('ep_CCCCCCCC', sha256('z'), 'acme', ARRAY['write'])"
        )
