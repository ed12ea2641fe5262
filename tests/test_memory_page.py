"""The user's memory page: the signed link (through real sockets, across tenants and scopes), the
page in headless Chromium (forget one episode, correct one summary, then the database and recall
agree), its forms without a browser, and refused links (altered, expired, another user's)."""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import shutil
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from support.api_server import scratch_database, serve
from support.browser import CHROMIUM, Browser

from jobs.db import Database, one
from jobs.embeddings import Embedder
from jobs.service.keys import create_key
from jobs.service.page_link import (
    LIFETIME,
    link_secret,
    sign,
)

MARIA = [
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
    {
        "user_id": "u-maria",
        "session_id": "m3",
        "purpose": "support",
        "started_at": "2025-07-10T09:00:00Z",
        "ended_at": "2025-07-10T09:30:00Z",
        "messages": [
            {"role": "user", "content": "We decided to move the weekly sync with Priya to Thursdays."},
            {"role": "assistant", "content": "Done, the Thursday sync invitation is out."},
        ],
    },
    {
        "user_id": "u-omar",
        "session_id": "o1",
        "started_at": "2025-03-01T09:00:00Z",
        "ended_at": "2025-03-01T09:10:00Z",
        "messages": [
            {"role": "user", "content": "We decided the Lisbon office opens in September."},
            {"role": "assistant", "content": "Great, I'll note the Lisbon opening."},
        ],
    },
]
SAM = {
    "user_id": "u-sam",
    "session_id": "g1",
    "started_at": "2025-02-01T10:00:00Z",
    "ended_at": "2025-02-01T10:10:00Z",
    "messages": [
        {"role": "user", "content": "We decided to keep the pricing tier at Pro for the globex team."},
        {"role": "assistant", "content": "Understood, Pro it is."},
    ],
}
needs_chromium = pytest.mark.skipif(
    not Path(CHROMIUM).exists() or shutil.which(CHROMIUM) is None,
    reason=f"{CHROMIUM} is not installed (apt-get install chromium)",
)


@dataclass
class Api:
    url: str
    db: Database
    keys: dict[str, str]

    def client(self, key: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.keys[key]}"} if key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60)

    def link(self, user_id: str, key: str = "acme") -> str:
        with self.client(key) as c:
            r = c.post(f"/v1/users/{user_id}/memory-link")
        assert r.status_code == 200, r.text
        url = str(r.json()["url"])
        assert url.startswith("/memory?token=")  # relative: no EPISODES_PUBLIC_URL here, and never the Host header
        return self.url + url

    def episodes(self, tenant: str, user_id: str) -> dict[str, dict[str, object]]:
        """session id -> the current episode's row (as the owner, across row-level security)."""
        with self.db.admin() as conn:
            rows = conn.execute(
                "SELECT id, session_id, summary FROM episodes WHERE tenant_id = %s AND user_id = %s"
                " AND status = 'current' AND kind = 'session'",
                (tenant, user_id),
            ).fetchall()
        return {r["session_id"]: dict(r) for r in rows}


@pytest.fixture(scope="module")
def api(
    admin_url: str, template_db: str, embedder: Embedder, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Api]:
    from jobs.extract.offline import OfflineExtractor
    from jobs.summarize import run_summarize

    with scratch_database(
        admin_url,
        template_db,
        f"page_{os.getpid()}_{Path(__file__).stem}",
        home=tmp_path_factory.mktemp("home"),
        api_key_cache_seconds=0.0,
        extractor="offline",
    ) as db:
        keys = {
            label: create_key(db, tenant, scopes, name=label)[1]
            for label, tenant, scopes in [
                ("acme", "acme", ("recall", "edit", "ingest")),
                ("globex", "globex", ("recall", "write", "admin")),
                ("acme_read", "acme", ("recall",)),
                ("acme_edit", "acme", ("edit",)),
            ]
        }
        with serve(db) as url:
            found = Api(url, db, keys)
            with found.client("acme") as acme, found.client("globex") as globex:
                assert acme.post("/v1/transcripts", json={"transcripts": MARIA}).status_code == 200
                assert globex.post("/v1/transcripts", json={"transcripts": [SAM]}).status_code == 200
            run_summarize(db, extractor=OfflineExtractor(embedder), embedder=embedder)
            yield found


def _token(url: str) -> str:
    return parse_qs(urlsplit(url).query)["token"][0]


def test_link_needs_a_key_with_recall_and_edit_and_is_for_the_keys_tenant(api: Api) -> None:
    with api.client() as anonymous:
        assert anonymous.post("/v1/users/u-maria/memory-link").status_code == 401
    for key, missing in (("acme_read", "the 'edit' scope"), ("acme_edit", "both the 'recall' and 'edit' scopes")):
        with api.client(key) as c:
            r = c.post("/v1/users/u-maria/memory-link")
        assert r.status_code == 403 and missing in r.json()["error"]["message"], r.text
    with api.client("acme") as c:
        r = c.post("/v1/users/u-maria/memory-link")
    body = r.json()
    assert r.status_code == 200 and body["user_id"] == "u-maria"
    expires = dt.datetime.fromisoformat(body["expires_at"])
    assert dt.timedelta(minutes=14) < expires - dt.datetime.now(dt.UTC) <= LIFETIME
    page = httpx.get(api.url + body["url"], timeout=60)
    assert page.status_code == 200 and "What we remember about you" in page.text
    assert "Thursday" in page.text and "Lisbon" not in page.text and "globex" not in page.text
    csp = page.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "form-action 'self'" in csp and "frame-ancestors 'none'" in csp
    assert page.headers["cache-control"] == "no-store" and page.headers["referrer-policy"] == "no-referrer"
    # globex's key makes links for globex only: its link for u-maria shows nothing of acme's u-maria
    other = httpx.get(api.link("u-maria", key="globex"), timeout=60)
    assert other.status_code == 200 and "We do not remember any conversations with you." in other.text
    assert "Business plan" not in other.text and "Thursday" not in other.text


def test_link_refuses_another_users_or_tenants_episode_and_changes_nothing(api: Api) -> None:
    token = _token(api.link("u-maria"))
    omar = api.episodes("acme", "u-omar")["o1"]
    sam = api.episodes("globex", "u-sam")["g1"]
    for victim in (omar, sam):
        r = httpx.post(
            f"{api.url}/memory/forget", params={"token": token}, data={"episode_id": victim["id"], "confirm": "yes"}
        )
        assert r.status_code == 404 and "no longer here" in r.text
        r = httpx.post(
            f"{api.url}/memory/correct",
            params={"token": token},
            data={"episode_id": victim["id"], "summary": "Rewritten by somebody else entirely."},
        )
        assert r.status_code == 404
    assert api.episodes("acme", "u-omar")["o1"] == omar and api.episodes("globex", "u-sam")["g1"] == sam


def test_altered_and_expired_links_answer_a_plain_page_asking_for_a_new_one(api: Api) -> None:
    url = api.link("u-maria")
    payload, mac = _token(url).split(".")
    for bad in (
        f"{payload}.{mac[:-2]}AA",
        f"{payload[:-1]}.{mac}",
        "",
        "nonsense",
        _forged(payload, mac, "u-omar"),
        _forged(payload, mac, "u-maria", tenant="globex"),
    ):
        r = httpx.get(f"{api.url}/memory", params={"token": bad})
        assert r.status_code == 403 and "ask for a new link" in r.text and "Business plan" not in r.text, bad
        r = httpx.post(f"{api.url}/memory/forget", params={"token": bad}, data={"episode_id": "1", "confirm": "yes"})
        assert r.status_code == 403
    secret = link_secret(api.db)
    key_id = _key_id(token=_token(url))
    expired, _ = sign(secret, "acme", "u-maria", key_id, dt.datetime.now(dt.UTC) - LIFETIME - dt.timedelta(seconds=1))
    r = httpx.get(f"{api.url}/memory", params={"token": expired})
    assert r.status_code == 410 and "has expired" in r.text and "ask for a new link" in r.text
    assert "Thursday" not in r.text and "default-src 'none'" in r.headers["content-security-policy"]


def test_a_form_with_a_bad_or_expired_link_is_refused_before_its_body_is_read(api: Api) -> None:
    """The form says it sends a megabyte and sends a few bytes: with an altered, expired or missing link the
    refusal comes at once (the token is in the form's address, checked first); a worker never waits for,
    reads or parses the body of someone without a live link."""
    token = _token(api.link("u-maria"))
    expired, _ = sign(
        link_secret(api.db),
        "acme",
        "u-maria",
        _key_id(token),
        dt.datetime.now(dt.UTC) - LIFETIME - dt.timedelta(seconds=1),
    )
    host, port = urlsplit(api.url).hostname or "", urlsplit(api.url).port or 80
    for form in ("forget", "correct", "item"):
        for bad, status in ((token[:-2] + "AA", 403), (expired, 410), ("", 403)):
            with socket.create_connection((host, port)) as sock:
                sock.settimeout(30)  # the answer must not wait for the rest of the body
                sock.sendall(
                    f"POST /memory/{form}?token={bad} HTTP/1.1\r\nHost: x\r\n"
                    "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000000\r\n\r\n"
                    "episode_id=1&confirm=yes&summary=".encode()
                )
                answer = b""
                while b"</html>" not in answer and (chunk := sock.recv(65536)):
                    answer += chunk
            assert answer.startswith(f"HTTP/1.1 {status}".encode()), (form, bad, answer[:200])
            assert b"ask for a new link" in answer


def _key_id(token: str) -> int:
    payload = token.split(".")[0]
    return int(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))[3])


def _forged(payload: str, mac: str, user_id: str, tenant: str = "acme") -> str:
    """The link's payload rewritten for someone else, keeping the original signature."""
    _, _, expires, key_id = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    raw = json.dumps([tenant, user_id, expires, key_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=") + "." + mac


def test_forms_work_without_a_browser_and_forgetting_needs_the_confirmation(api: Api) -> None:
    token = _token(api.link("u-maria"))
    m1 = api.episodes("acme", "u-maria")["m1"]
    r = httpx.post(f"{api.url}/memory/forget", params={"token": token}, data={"episode_id": m1["id"]})
    assert r.status_code == 422 and "cannot be undone" in r.text and "m1" in api.episodes("acme", "u-maria")
    r = httpx.post(
        f"{api.url}/memory/correct", params={"token": token}, data={"episode_id": m1["id"], "summary": "short"}
    )
    assert r.status_code == 422 and "between 10 and 1,200 characters" in r.text
    assert api.episodes("acme", "u-maria")["m1"]["summary"] == m1["summary"]
    with api.db.admin() as conn:
        items = conn.execute(
            "SELECT id, type, what FROM episode_events WHERE episode_id = %s AND type IN "
            "('open_question', 'commitment') AND status = 'open' ORDER BY id",
            (m1["id"],),
        ).fetchall()
    assert items, "the offline extractor found no open item in m1"
    r = httpx.post(
        f"{api.url}/memory/item", params={"token": token}, data={"event_id": items[0]["id"], "action": "done"}
    )
    assert r.status_code == 200 and "Marked as done" in r.text
    with api.db.admin() as conn:
        status = one(conn.execute("SELECT status FROM episode_events WHERE id = %s", (items[0]["id"],)))
        audit = conn.execute(
            "SELECT actor, field FROM episode_corrections WHERE event_id = %s", (items[0]["id"],)
        ).fetchall()
    assert status["status"] == "done" and audit == [{"actor": "user:u-maria", "field": "event.status"}]
    r = httpx.post(
        f"{api.url}/memory/item", params={"token": token}, data={"event_id": items[0]["id"], "action": "delete"}
    )
    assert r.status_code == 422 and "not one this page offers" in r.text


@pytest.mark.slow  # headless Chromium
@needs_chromium
def test_in_chromium_correct_one_summary_and_forget_one_episode(api: Api, tmp_path: Path) -> None:
    before = api.episodes("acme", "u-maria")
    m2, m3 = before["m2"], before["m3"]
    browser = Browser(tmp_path / "profile")
    try:
        assert browser.open(api.link("u-maria")) == 200
        page = browser.html()
        listed = page[page.index('id="episodes-heading"') :]
        assert listed.index("10 July 2025") < listed.index("3 June 2025") < listed.index("21 January 2025")
        assert "Forget this" in page and "Correct this" in page and "This cannot be undone." in page
        corrected = "We agreed a Cost Guard alert threshold of 7 credits per query, not 5."
        status = browser.act(f"""(() => {{
            const item = document.getElementById('episode-{m2["id"]}');
            const details = item.querySelectorAll('details')[0];
            details.querySelector('summary').click();
            const field = details.querySelector('textarea');
            field.value = {json.dumps(corrected)};
            details.querySelector('button[type=submit]').click();
        }})()""")
        assert status == 200
        assert "now reads as you wrote it" in browser.html() and corrected in browser.html()
        status = browser.act(f"""(() => {{
            const item = document.getElementById('episode-{m3["id"]}');
            const details = item.querySelectorAll('details')[1];
            details.querySelector('summary').click();
            details.querySelector('input[type=checkbox]').click();
            details.querySelector('button[type=submit]').click();
        }})()""")
        assert status == 200
        after_page = browser.html()
        assert "Forgotten: the conversation of 10 July 2025" in after_page
        assert f'id="episode-{m3["id"]}"' not in after_page and "Thursday" not in after_page
        origin = api.url
        assert all(u.startswith(origin + "/memory") or u == "about:blank" for u in browser.requested_urls()), (
            browser.requested_urls()
        )
        assert browser.console() == []
    finally:
        browser.close()
    after = api.episodes("acme", "u-maria")
    assert "m3" not in after and after["m2"]["summary"] == corrected
    with api.db.admin() as conn:
        assert one(conn.execute("SELECT count(*) AS n FROM episodes WHERE id = %s", (m3["id"],)))["n"] == 0
    with api.client("acme") as c:
        recall = c.post("/v1/recall", json={"user_id": "u-maria", "message": "When is the weekly sync with Priya?"})
    assert recall.status_code == 200
    body = recall.json()
    assert "m3" not in {e["session_id"] for e in body["episodes"]} and "Thursday" not in body["block"]
    with api.client("acme") as c:
        recall = c.post("/v1/recall", json={"user_id": "u-maria", "message": "What is the Cost Guard threshold?"})
    assert "7 credits per query" in recall.json()["block"]


def test_old_open_items_are_listed_apart_as_probably_settled(api: Api, embedder: Embedder) -> None:
    """Items recall counts as stale (past due by more than the grace, or older than the age without a due
    date) are not listed as still open (issue 31: 2024 items were), but apart, as older, with the same
    actions; the page says its notes speak of the user as "the user" (issue 31: it mixed that with "you")."""
    from jobs.extract.offline import OfflineExtractor
    from jobs.summarize import run_summarize

    recent = dt.datetime.now(dt.UTC) - dt.timedelta(days=2)
    lea = [
        {
            "user_id": "u-lea",
            "session_id": "lea-old",
            "started_at": "2024-03-04T10:00:00Z",
            "ended_at": "2024-03-04T10:20:00Z",
            "messages": [
                {"role": "user", "content": "Do the Lisbon invoices include VAT? I need to know before the audit."},
                {"role": "assistant", "content": "I'll find out and email you tomorrow."},
            ],
        },
        {
            "user_id": "u-lea",
            "session_id": "lea-new",
            "started_at": recent.isoformat(),
            "ended_at": (recent + dt.timedelta(minutes=20)).isoformat(),
            "messages": [
                {"role": "user", "content": "Can you check whether the Porto office has its own budget line?"},
                {"role": "assistant", "content": "I'll check with finance and get back to you by Friday."},
            ],
        },
    ]
    with api.client("acme") as acme:
        assert acme.post("/v1/transcripts", json={"transcripts": lea}).status_code == 200
    run_summarize(api.db, extractor=OfflineExtractor(embedder), embedder=embedder)
    html = httpx.get(api.link("u-lea")).text
    still_open, older = html.split('id="items-heading"')[1].split('id="older-heading"')
    older = older.split('id="episodes-heading"')[0]
    assert "Porto office" in still_open and "Lisbon invoices" not in still_open
    assert "Lisbon invoices" in older and "This is done" in older
    assert "past their due date by more than 30 days, or older than 180 days without one" in older
    assert "they speak of you as &ldquo;the user&rdquo;" in html
