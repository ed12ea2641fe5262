"""The export holds everything (issue 35, item 12): a transcript's stored metadata (the project folder, git
branch and program versions a host handed over) is in `GET /v1/users/{id}/export` and `episodes export`."""

from __future__ import annotations

import httpx
from support.api_server import serve

from jobs.db import Database
from jobs.rights.export import export_user
from jobs.service.keys import create_key

META = {
    "project": "/home/maria/shop",
    "git_branch": "feature/pricing",
    "claude_code_version": "2.0.14",
    "tools": {"python": "3.12.4", "node": None},
}


def _session(session_id: str, **extra: object) -> dict[str, object]:
    return {
        "user_id": "u-maria",
        "session_id": session_id,
        "started_at": "2025-01-21T10:00:00Z",
        "ended_at": "2025-01-21T10:20:00Z",
        **extra,
        "messages": [
            {"role": "user", "content": "Keep the Business plan at $69 per seat."},
            {"role": "assistant", "content": "Noted."},
        ],
    }


def test_the_export_holds_each_transcripts_metadata(db: Database) -> None:
    ingest = create_key(db, "acme", ("ingest",))[1]
    export = create_key(db, "acme", ("export",))[1]
    with serve(db) as url:
        r = httpx.post(
            f"{url}/v1/transcripts",
            headers={"Authorization": f"Bearer {ingest}"},
            json={"transcripts": [_session("with-meta", metadata=META), _session("without")]},
        )
        assert r.status_code == 200 and all(x["result"] == "accepted" for x in r.json()["results"]), r.text
        r = httpx.get(f"{url}/v1/users/u-maria/export", headers={"Authorization": f"Bearer {export}"})
    assert r.status_code == 200, r.text
    transcripts = {t["session_id"]: t for t in r.json()["transcripts"]}
    assert transcripts["with-meta"]["metadata"] == META  # as given, a null inside it too
    assert transcripts["without"]["metadata"] is None  # said to be none, not left out
    assert any("metadata" in note for note in r.json()["notes"])
    assert export_user(db, "acme", "u-maria")["transcripts"] == r.json()["transcripts"]  # the CLI's document too
