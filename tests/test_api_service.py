"""`episodes api` through real sockets: two tenants with their own keys, every route tried across
tenants, and every error status (401, 403, 404, 413, 422, 429)."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from support.api_server import BACKENDS, backend_database, serve

from jobs import migrate
from jobs.db import Database
from jobs.embeddings import Embedder
from jobs.service.keys import create_key, revoke_key

pytestmark = pytest.mark.citus  # runs on one PostgreSQL and on the Citus cluster (the `api` fixture's params)

ACME_TRANSCRIPTS = [
    {
        "user_id": "u-maria",
        "session_id": "m1",
        "purpose": "sales",
        "started_at": "2025-01-21T10:00:00Z",
        "ended_at": "2025-01-21T10:20:00Z",
        "messages": [
            {"role": "user", "content": "We decided to go with the Business plan at $69 per seat for pricing."},
            {"role": "assistant", "content": "Noted. I'll send the renewal order form by Friday."},
            {"role": "user", "content": "Can you also check whether Snowflake costs are included?"},
        ],
    },
    {
        "user_id": "u-maria",
        "session_id": "m2",
        "purpose": "support",
        "started_at": "2025-06-03T09:00:00Z",
        "ended_at": "2025-06-03T09:30:00Z",
        "messages": [
            {"role": "user", "content": "Let's set the Cost Guard threshold to 5 credits per query."},
            {"role": "assistant", "content": "Configured: alerts go to the data-costs channel."},
        ],
    },
]
GLOBEX_TRANSCRIPT = {
    "user_id": "u-sam",
    "session_id": "g1",
    "started_at": "2025-02-01T10:00:00Z",
    "ended_at": "2025-02-01T10:10:00Z",
    "messages": [
        {"role": "user", "content": "We decided to keep the pricing tier at Pro for the globex team."},
        {"role": "assistant", "content": "Understood, Pro it is."},
    ],
}


@dataclass
class Api:
    url: str
    db: Database
    keys: dict[str, str]  # name -> secret

    def client(self, key: str | None = None, **headers: str) -> httpx.Client:
        if key is not None:
            headers["Authorization"] = f"Bearer {self.keys[key]}"
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)


@pytest.fixture(scope="module", params=BACKENDS)
def api(request: pytest.FixtureRequest, embedder: Embedder, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    """One database and one server for the module on each backend: acme (u-maria) and globex (u-sam), summarised."""
    from jobs.extract.offline import OfflineExtractor
    from jobs.summarize import run_summarize

    with backend_database(
        request,
        f"api_{os.getpid()}_{Path(__file__).stem}",
        home=tmp_path_factory.mktemp("home"),
        api_max_body=64 * 1024,
        api_key_cache_seconds=0.0,
    ) as db:
        keys = {}
        for label, tenant, scopes, rate in [
            ("acme", "acme", ("recall", "write", "admin", "export"), None),
            ("globex", "globex", ("recall", "write", "admin", "export"), None),
            ("acme_read", "acme", ("recall", "export"), None),
            ("acme_slow", "acme", ("recall",), 0.01),
        ]:
            keys[label] = create_key(db, tenant, scopes, name=label, rate_limit=rate)[1]
        with serve(db) as url:
            found = Api(url, db, keys)
            with found.client("acme") as acme, found.client("globex") as globex:
                assert acme.post("/v1/transcripts", json={"transcripts": ACME_TRANSCRIPTS}).status_code == 200
                assert globex.post("/v1/transcripts", json={"transcripts": [GLOBEX_TRANSCRIPT]}).status_code == 200
            run_summarize(db, extractor=OfflineExtractor(embedder), embedder=embedder)
            yield found


def _episode_ids(api: Api, tenant: str) -> list[int]:
    with api.db.admin() as conn:
        return [r["id"] for r in conn.execute("SELECT id FROM episodes WHERE tenant_id = %s ORDER BY id", (tenant,))]


def test_recall_returns_the_block_and_the_structured_result(api: Api) -> None:
    with api.client("acme") as c:
        r = c.post("/v1/recall", json={"user_id": "u-maria", "message": "What did we decide about pricing?"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["block"].startswith("<previous_episodes")
    assert {e["session_id"] for e in body["episodes"]} == {"m1", "m2"}
    assert all(e["reasons"] and "score" in e for e in body["episodes"])
    assert r.headers["x-request-id"]


def test_recall_never_crosses_tenants(api: Api) -> None:
    with api.client("globex") as c:
        body = c.post("/v1/recall", json={"user_id": "u-maria", "message": "pricing"}).json()
    assert body["episodes"] == [] and body["open_items"] == [] and "Business plan" not in body["block"]


def test_episodes_list_get_and_cursor(api: Api) -> None:
    with api.client("acme") as c:
        first = c.get("/v1/users/u-maria/episodes", params={"limit": 1}).json()
        second = c.get("/v1/users/u-maria/episodes", params={"limit": 1, "cursor": first["next_cursor"]}).json()
        assert [e["session_id"] for e in first["items"] + second["items"]] == ["m2", "m1"]
        assert second["next_cursor"] is None
        one = c.get(f"/v1/episodes/{first['items'][0]['id']}").json()
        assert one["session_id"] == "m2" and isinstance(one["events"], list) and "entities" in one
        bad = c.get("/v1/users/u-maria/episodes", params={"cursor": "garbage"})
        assert bad.status_code == 400 and bad.json()["error"]["field"] == "query.cursor"


def test_other_tenants_ids_answer_404_and_their_lists_are_empty(api: Api) -> None:
    globex_episode = _episode_ids(api, "globex")[0]
    with api.client("acme") as c:
        r = c.get(f"/v1/episodes/{globex_episode}")
        assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
        assert c.get("/v1/users/u-sam/episodes").json() == {"items": [], "next_cursor": None}
        assert c.get("/v1/events", params={"user_id": "u-sam"}).json()["items"] == []
        assert c.get("/v1/users/u-sam/export").status_code == 404
        assert c.delete("/v1/users/u-sam").status_code == 404
        # a record naming the other tenant is rejected, not written
        r = c.post(
            "/v1/transcripts",
            json={"transcripts": [{**GLOBEX_TRANSCRIPT, "tenant_id": "globex", "session_id": "g-evil"}]},
        )
        assert r.json()["results"] == [
            {"index": 0, "result": "rejected", "reason": "tenant_id 'globex' is not the tenant of this key"}
        ]
    with api.db.admin() as conn:
        rows = conn.execute("SELECT tenant_id, session_id FROM transcripts WHERE tenant_id = 'globex'").fetchall()
        erasures = conn.execute("SELECT count(*) AS n FROM erasures WHERE tenant_id = 'globex'").fetchone()
    assert [r["session_id"] for r in rows] == ["g1"] and erasures == {"n": 0}


def test_events_by_full_text_with_status(api: Api) -> None:
    with api.client("acme") as c:
        found = c.get("/v1/events", params={"type": "decision", "q": "pricing", "user_id": "u-maria"}).json()["items"]
        assert found and all(
            e["type"] == "decision" and e["status"] in {"open", "resolved", "stale", "superseded"} for e in found
        )
        assert any("Business plan" in e["what"] for e in found)
        assert c.get("/v1/events", params={"status": "bogus"}).status_code == 422


def test_transcripts_report_each_record_and_are_idempotent(api: Api) -> None:
    record = {"user_id": "u-new", "session_id": "n1", "messages": [{"role": "user", "content": "hello"}]}
    with api.client("acme") as c:
        r = c.post(
            "/v1/transcripts",
            json={"transcripts": [record, {"user_id": "x", "session_id": "n2", "messages": []}, record]},
        )
        results = r.json()["results"]
        assert [x["result"] for x in results] == ["accepted", "rejected", "rejected"]
        assert "messages" in results[1]["reason"] and "duplicate session_id" in results[2]["reason"]
        again = c.post("/v1/transcripts", json={"transcripts": [record]}).json()
        assert again["results"] == [{"index": 0, "result": "unchanged", "reason": None}]


def test_export_and_forget_a_user(api: Api) -> None:
    record = {"user_id": "u-gone", "session_id": "x1", "messages": [{"role": "user", "content": "forget me"}]}
    with api.client("acme") as c, api.client("acme_read") as reader:
        c.post("/v1/transcripts", json={"transcripts": [record]})
        assert reader.get("/v1/users/u-gone/export").json()["counts"]["transcripts"] == 1
        assert reader.delete("/v1/users/u-gone").status_code == 403
        r = c.delete("/v1/users/u-gone")
        assert r.status_code == 200 and r.json()["counts"]["transcripts"] == 1 and r.json()["erasure_id"]
        assert c.get("/v1/users/u-gone/export").status_code == 404


@pytest.mark.parametrize(
    "header", [None, "Bearer nonsense", "Bearer ep_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "Basic dXNlcjpwdw=="]
)
def test_missing_or_bad_keys_answer_401(api: Api, header: str | None) -> None:
    headers = {"Authorization": header} if header else {}
    r = httpx.post(f"{api.url}/v1/recall", json={"user_id": "u", "message": "m"}, headers=headers)
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert r.json()["error"]["code"] == "unauthorized"


def test_revoked_key_answers_401(api: Api) -> None:
    key, secret = create_key(api.db, "acme", ("recall",), name="short-lived")
    with httpx.Client(base_url=api.url, headers={"Authorization": f"Bearer {secret}"}) as c:
        assert c.get("/v1/users/u-maria/episodes").status_code == 200
        revoke_key(api.db, key.prefix)
        assert c.get("/v1/users/u-maria/episodes").status_code == 401  # the module's cache bound is 0 s


def test_scope_is_enforced_with_403(api: Api) -> None:
    with api.client("acme_read") as c:
        r = c.post("/v1/transcripts", json={"transcripts": [GLOBEX_TRANSCRIPT]})
    assert r.status_code == 403 and "'ingest'" in r.json()["error"]["message"]


def test_rate_limit_answers_429_with_retry_after(api: Api) -> None:
    with api.client("acme_slow") as c:
        assert c.get("/v1/users/u-maria/episodes").status_code == 200
        r = c.get("/v1/users/u-maria/episodes")
    assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1


def test_bodies_over_the_limit_answer_413_even_when_streamed(api: Api) -> None:
    big = b'{"transcripts": [' + b" " * (70 * 1024) + b"]}"
    with api.client("acme") as c:
        assert c.post("/v1/transcripts", content=big, headers={"content-type": "application/json"}).status_code == 413

        def chunks() -> Iterator[bytes]:  # no Content-Length: chunked transfer
            yield b'{"transcripts": ['
            for _ in range(70):
                yield b" " * 1024
            yield b"]}"

        r = c.post("/v1/transcripts", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413 and r.json()["error"]["code"] == "body_too_large"


def test_malformed_json_and_unknown_fields_answer_422_with_the_field(api: Api) -> None:
    with api.client("acme") as c:
        r = c.post("/v1/recall", json={"user_id": "u-maria", "message": "hi", "budget": 10})
        assert r.status_code == 422 and r.json()["error"]["field"] == "body.budget"
        r = c.post("/v1/recall", content=b'{"user_id": "u', headers={"content-type": "application/json"})
        assert r.status_code == 422 and r.json()["error"]["field"].startswith("body")


def test_request_id_is_echoed_and_health_and_metrics_answer(api: Api) -> None:
    r = httpx.get(f"{api.url}/healthz", headers={"X-Request-Id": "abc-123"})
    # The schema version the code needs, with no database read (issue 31: it answered null); /readyz the database's.
    assert r.json() == {"status": "ok", "schema_version": migrate.code_version()}
    assert r.headers["x-request-id"] == "abc-123"
    assert httpx.get(f"{api.url}/readyz").json()["schema_version"] == migrate.code_version()
    assert httpx.get(f"{api.url}/v1/episodes/123456").status_code == 401  # counted under its template
    text = httpx.get(f"{api.url}/metrics").text
    assert 'route="/v1/episodes/{episode_id}"' in text and "episodes_queue_depth" in text
    gc.collect()  # the server runs in this process: a full pass of its collector, timed
    assert 'episodes_gc_pause_seconds_count{generation="2"}' in httpx.get(f"{api.url}/metrics").text
    assert httpx.get(f"{api.url}/openapi.json").json()["paths"]["/v1/recall"]


def test_the_app_role_cannot_read_the_keys(api: Api) -> None:
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        with api.db.tenant("acme") as conn:
            conn.execute("SELECT * FROM api_keys")


def _maria_episode(api: Api, session_id: str) -> dict[str, Any]:
    with api.client("acme") as c:
        items = c.get("/v1/users/u-maria/episodes").json()["items"]
    return next(e for e in items if e["session_id"] == session_id)


def test_patch_corrects_an_episode_audited_and_seen_by_recall(api: Api) -> None:
    episode = _maria_episode(api, "m2")
    summary = "Maria set the query budget alarm (Cost Guard) to 7 credits per query, sent to the finance channel."
    with api.client("acme") as c, api.client("acme_read") as reader, api.client("globex") as globex:
        assert reader.patch(f"/v1/episodes/{episode['id']}", json={"summary": summary}).status_code == 403
        assert globex.patch(f"/v1/episodes/{episode['id']}", json={"summary": summary}).status_code == 404
        bad = c.patch(f"/v1/episodes/{episode['id']}", json={"summary": "short"})
        assert bad.status_code == 422 and bad.json()["error"]["field"] == "body.summary"
        unknown = c.patch(f"/v1/episodes/{episode['id']}", json={"drop_events": [2**62]})
        assert unknown.status_code == 422 and "drop_events" in unknown.json()["error"]["field"]
        dry = c.patch(f"/v1/episodes/{episode['id']}", params={"dry_run": True}, json={"summary": summary}).json()
        assert dry["dry_run"] and dry["changes"] and dry["correction_ids"] == []
        assert c.get(f"/v1/episodes/{episode['id']}").json()["summary"] == episode["summary"]
        r = c.patch(f"/v1/episodes/{episode['id']}", json={"summary": summary})
        assert r.status_code == 200 and r.json()["correction_ids"], r.text
        assert c.get(f"/v1/episodes/{episode['id']}").json()["summary"] == summary
        block = c.post("/v1/recall", json={"user_id": "u-maria", "message": "the finance channel alarm"}).json()
        assert "finance channel" in block["block"]
    with api.db.admin() as conn:
        audit = conn.execute(
            "SELECT actor, new_value FROM episode_corrections WHERE episode_id = %s", (episode["id"],)
        ).fetchall()
    assert [a["new_value"] for a in audit] == [summary] and audit[0]["actor"].startswith("api-key:ep_")


def test_pin_and_unpin_through_the_api(api: Api) -> None:
    episode = _maria_episode(api, "m1")
    with api.client("acme") as c, api.client("globex") as globex:
        assert globex.put(f"/v1/episodes/{episode['id']}/pin").status_code == 404
        r = c.put(f"/v1/episodes/{episode['id']}/pin")
        assert r.status_code == 200 and r.json()["pinned"] and r.json()["changed"]
        assert c.put(f"/v1/episodes/{episode['id']}/pin").json()["changed"] is False
        assert c.delete(f"/v1/episodes/{episode['id']}/pin").json() == {
            "episode_id": episode["id"],
            "user_id": "u-maria",
            "pinned": False,
            "changed": True,
            "super_summary_rebuilt": None,
        }


def test_delete_erases_one_episode_and_recall_forgets_it(api: Api) -> None:
    record = {
        "user_id": "u-maria",
        "session_id": "m-forget",
        "ended_at": "2025-07-01T10:00:00Z",
        "messages": [{"role": "user", "content": "We decided the Zanzibar offsite budget is 40k euros."}],
    }
    with api.client("acme") as c:
        c.post("/v1/transcripts", json={"transcripts": [record]})
    from jobs.embeddings import embedder_for
    from jobs.extract.offline import OfflineExtractor
    from jobs.summarize import run_summarize

    embedder = embedder_for(api.db.settings)
    run_summarize(api.db, extractor=OfflineExtractor(embedder), embedder=embedder)
    episode = _maria_episode(api, "m-forget")
    with api.client("acme") as c, api.client("acme_read") as reader, api.client("globex") as globex:
        before = c.post("/v1/recall", json={"user_id": "u-maria", "message": "Zanzibar offsite budget"}).json()
        assert "Zanzibar" in before["block"]
        assert reader.delete(f"/v1/episodes/{episode['id']}").status_code == 403
        assert globex.delete(f"/v1/episodes/{episode['id']}").status_code == 404
        dry = c.delete(f"/v1/episodes/{episode['id']}", params={"dry_run": True}).json()
        assert dry["dry_run"] and dry["erased_ids"] == [episode["id"]] and dry["erasure_ids"] == []
        r = c.delete(f"/v1/episodes/{episode['id']}")
        assert r.status_code == 200 and r.json()["erasure_ids"], r.text
        assert c.get(f"/v1/episodes/{episode['id']}").status_code == 404
        assert c.delete(f"/v1/episodes/{episode['id']}").status_code == 404
        after = c.post("/v1/recall", json={"user_id": "u-maria", "message": "Zanzibar offsite budget"}).json()
        assert "Zanzibar" not in after["block"] and episode["id"] not in [e["id"] for e in after["episodes"]]
    with api.db.admin() as conn:
        left = conn.execute(
            "SELECT count(*) AS n FROM episode_events WHERE episode_id = %s", (episode["id"],)
        ).fetchone()
    assert left == {"n": 0}
