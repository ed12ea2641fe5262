"""What an ``ingest``-only key can and cannot do to what others stored (issue 46, items 5 and 13).

- A session belongs to the user it was stored for. Before, posting its session id under another
  ``user_id`` moved it (``ON CONFLICT ... DO UPDATE SET user_id``) and the first user's episode dropped
  out of their recall; now that record is refused as a conflict, with its place and reason, and the
  other records of the batch are stored.
- An erased session is refused without the day of its erasure: an ingest key learns only that it is
  refused. The operator's own `episodes ingest` still names the day.

Through the real service over HTTP, on a real database.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from psycopg.types.json import Jsonb
from support.api_server import serve
from support.claude_code_cli import _old_session

from jobs.cli import cli
from jobs.db import Database
from jobs.embeddings import Embedder
from jobs.extract.offline import OfflineExtractor
from jobs.ingest import ingest_records
from jobs.rights.forget import forget_user
from jobs.service.keys import create_key
from jobs.sql import query
from jobs.summarize import run_summarize

pytestmark = pytest.mark.citus  # runs on one PostgreSQL and on the Citus cluster (conftest)

DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


def _record(user: str, session: str, text: str) -> dict[str, Any]:
    return {
        "user_id": user,
        "session_id": session,
        "started_at": "2026-11-01T10:00:00Z",
        "ended_at": "2026-11-01T10:20:00Z",
        "messages": [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}],
    }


def _stored(db: Database) -> dict[str, tuple[str, str]]:
    with db.tenant("acme") as conn:
        return {
            r["session_id"]: (r["user_id"], r["messages"][0]["content"])
            for r in conn.execute("SELECT session_id, user_id, messages FROM transcripts WHERE tenant_id = 'acme'")
        }


def test_an_ingest_key_cannot_move_another_users_session(db: Database, embedder: Embedder) -> None:
    secret = create_key(db, "acme", ("ingest",), name="ingest-only")[1]
    with (
        serve(db) as url,
        httpx.Client(base_url=url, headers={"Authorization": f"Bearer {secret}"}, timeout=30) as client,
    ):
        first = client.post(
            "/v1/transcripts",
            json={"transcripts": [_record("ann", "s-1", "We decided to host the Quillfeather archive on Hetzner.")]},
        )
        assert first.json()["accepted"] == 1, first.text
        run_summarize(db, extractor=OfflineExtractor(embedder), embedder=embedder)
        moved = client.post(
            "/v1/transcripts",
            json={
                "transcripts": [
                    _record("eve", "s-2", "A session of Eve's own."),
                    _record("eve", "s-1", "Eve takes this session over."),
                ]
            },
        )
    assert moved.status_code == 200, moved.text
    body = moved.json()
    assert (body["accepted"], body["rejected"]) == (1, 1), body
    refused = body["results"][1]
    assert refused["index"] == 1 and refused["result"] == "rejected", body
    assert refused["reason"].startswith("conflict: session_id 's-1' is stored for another user"), refused
    assert "ann" not in refused["reason"]
    assert _stored(db) == {
        "s-1": ("ann", "We decided to host the Quillfeather archive on Hetzner."),
        "s-2": ("eve", "A session of Eve's own."),
    }
    with db.tenant("acme") as conn:
        episodes = [
            (r["user_id"], r["status"])
            for r in conn.execute(
                "SELECT e.user_id, t.status FROM episodes e JOIN transcripts t ON t.tenant_id = e.tenant_id "
                "AND t.id = e.transcript_id WHERE e.tenant_id = 'acme'"
            )
        ]
    assert episodes == [("ann", "done")]  # ann's episode stays hers; nothing queued to summarise it again


def test_the_cli_refuses_a_move_too_naming_the_line(db: Database, tmp_path: Path) -> None:
    path = tmp_path / "sessions.jsonl"
    path.write_text(json.dumps({**_record("ann", "s-1", "Ann's words."), "tenant_id": "acme"}) + "\n")
    assert CliRunner().invoke(cli, ["ingest", str(path)]).exit_code == 0
    path.write_text(
        "\n".join(
            json.dumps({**r, "tenant_id": "acme"})
            for r in (_record("bob", "s-1", "Bob's words."), _record("bob", "s-3", "Bob's own session."))
        )
        + "\n"
    )
    again = CliRunner().invoke(cli, ["ingest", str(path)])
    assert f"{path}:1: conflict: session_id 's-1' is stored for another user" in again.stderr, again.output
    assert _stored(db) == {"s-1": ("ann", "Ann's words."), "s-3": ("bob", "Bob's own session.")}


def test_a_sync_under_another_user_is_refused_once(
    db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`claude-code sync --user bob` of a session ann's sync stored: a conflict, reported once (the file is
    not read again until it changes), and the session stays ann's."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    _old_session(tmp_path, "cc-1", "/work/shop")
    first = CliRunner().invoke(cli, ["claude-code", "sync", "--tenant", "acme", "--user", "ann"])
    assert "1 session stored" in first.stdout, first.output
    line = {
        "sessionId": "cc-1",
        "cwd": "/work/shop",
        "isSidechain": False,
        "type": "user",
        "uuid": "u2",
        "timestamp": "2026-11-20T10:05:00Z",
        "message": {"role": "user", "content": "Resumed under another login name."},
    }
    with (tmp_path / ".claude" / "projects" / "-work-shop" / "cc-1.jsonl").open("a") as f:
        f.write(json.dumps(line) + "\n")  # resumed: the file changed, so it is read again
    as_bob = ["claude-code", "sync", "--tenant", "acme", "--user", "bob"]
    refused = CliRunner().invoke(cli, as_bob)
    assert "conflict: session_id 'cc-1' is stored for another user" in refused.stderr, refused.output
    quiet = CliRunner().invoke(cli, as_bob)
    assert quiet.stderr == "" and "(1 unchanged since stored)" in quiet.stdout, quiet.output
    with db.tenant("acme") as conn:
        assert conn.execute("SELECT user_id FROM transcripts WHERE session_id = 'cc-1'").fetchall() == [
            {"user_id": "ann"}
        ]


def test_an_ingest_key_is_not_told_when_a_session_was_erased(db: Database) -> None:
    secret = create_key(db, "acme", ("ingest",), name="ingest-only")[1]
    with (
        serve(db) as url,
        httpx.Client(base_url=url, headers={"Authorization": f"Bearer {secret}"}, timeout=30) as client,
    ):
        assert client.post("/v1/transcripts", json={"transcripts": [_record("zoe", "z-1", "Hi.")]}).json()["accepted"]
        forget_user(db, "acme", "zoe")
        again = client.post("/v1/transcripts", json={"transcripts": [_record("zoe", "z-1", "Hi.")]})
    result = again.json()["results"][0]
    assert result["result"] == "rejected" and "an erased session is not stored again" in result["reason"], result
    assert not DAY.search(result["reason"]), result["reason"]


def test_the_upsert_itself_never_moves_a_session(db: Database) -> None:
    """Should a write come in between ingest's check and its upsert, the upsert changes nothing."""
    assert ingest_records(db, [("t:1", {**_record("ann", "s-1", "Ann's words."), "tenant_id": "acme"})]).inserted == 1
    params = {
        "tenant_id": "acme",
        "user_id": "eve",
        "session_id": "s-1",
        "agent_id": "a",
        "purpose": "general",
        "started_at": None,
        "ended_at": None,
        "messages": Jsonb([{"role": "user", "content": "Eve's words."}]),
        "metadata": None,
        "content_hash": "0" * 64,
        "source": "t:2",
    }
    with db.tenant("acme") as conn:
        assert conn.execute(query("upsert_transcript"), params).fetchone() is None
    assert _stored(db) == {"s-1": ("ann", "Ann's words.")}
