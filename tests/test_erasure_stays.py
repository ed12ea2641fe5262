"""An erasure stays erased (issue 35, item 3): after `episodes forget` the erased sessions never come back,
whatever path brings them (`episodes ingest` of the same file, POST /v1/transcripts, `episodes claude-code
sync` of a resumed session file, the SessionEnd hook, a hand INSERT), and every path says why; a new
session of the same user is stored. Through the real commands and the real service, on a real database.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner, Result
from support.api_server import serve
from support.claude_code_cli import _old_session

from jobs.claude_code.places import log_file, state_dir
from jobs.claude_code.session_state import SessionState, save
from jobs.cli import cli
from jobs.db import Conn, Database, one
from jobs.ingest import ingest_records
from jobs.rights.forget import forget_user
from jobs.service.keys import create_key

pytestmark = pytest.mark.citus  # runs on one PostgreSQL and on the Citus cluster (conftest)


def _record(session: str, text: str, user: str = "u-zoe") -> dict[str, Any]:
    return {
        "tenant_id": "acme",
        "user_id": user,
        "session_id": session,
        "started_at": "2026-11-01T10:00:00Z",
        "ended_at": "2026-11-01T10:20:00Z",
        "messages": [{"role": "user", "content": text}],
    }


def _sessions(db: Database, tenant: str = "acme") -> list[tuple[str, str]]:
    with db.tenant(tenant) as conn:
        return [
            (r["user_id"], r["session_id"])
            for r in conn.execute(
                "SELECT user_id, session_id FROM transcripts WHERE tenant_id = %s ORDER BY session_id", (tenant,)
            )
        ]


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def _forget(user: str, *more: str) -> Result:
    done = _run("forget", "--tenant", "acme", "--user", user, "--no-vacuum", *more)
    assert done.exit_code == 0, done.output
    return done


def test_ingest_of_the_same_file_after_forget_stores_nothing_and_says_why(db: Database, tmp_path: Path) -> None:
    path = tmp_path / "zoe.jsonl"
    path.write_text(
        "\n".join(
            json.dumps(r)
            for r in [_record("z-1", "Book the Zanzibar tour."), _record("z-2", "Add marzipan to the basket.")]
        )
        + "\n"
    )
    first = _run("ingest", str(path))
    assert first.exit_code == 0 and "2 new" in first.stdout, first.output
    done = _forget("u-zoe")
    assert "erased 2 transcripts" in done.stdout

    again = _run("ingest", str(path))
    assert _sessions(db) == []
    assert "its 2 sessions are refused from then on, on every path" in done.stdout
    assert "0 new" in again.stdout, again.output
    refused = [line for line in again.stderr.splitlines() if "erased on" in line]
    assert len(refused) == 2 and all("(episodes forget)" in line for line in refused), again.stderr
    assert again.exit_code == 1  # as for any record not stored

    # The same session with other content, or under another user id, is the erased session still.
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps([_record("z-1", "Book the Zanzibar tour, and more.", user="u-other")]))
    assert _run("ingest", str(changed)).exit_code == 1 and _sessions(db) == []
    # A new session of the same user is stored.
    new = tmp_path / "new.json"
    new.write_text(json.dumps([_record("z-3", "A new session after the erasure.")]))
    stored = _run("ingest", str(new))
    assert stored.exit_code == 0 and "1 new" in stored.stdout, stored.output
    assert _sessions(db) == [("u-zoe", "z-3")]


def test_kept_transcripts_are_not_requeued_by_a_new_upload(db: Database, tmp_path: Path) -> None:
    path = tmp_path / "zoe.json"
    path.write_text(json.dumps([_record("z-1", "Book the Zanzibar tour.")]))
    assert _run("ingest", str(path)).exit_code == 0
    _forget("u-zoe", "--keep-transcripts")
    path.write_text(json.dumps([_record("z-1", "Book the Zanzibar tour; it grew since.")]))
    again = _run("ingest", str(path))
    assert again.exit_code == 1 and "erased on" in again.stderr, again.output
    with db.tenant("acme") as conn:
        row = one(conn.execute("SELECT status, messages FROM transcripts WHERE tenant_id = 'acme'"))
    assert row["status"] == "done" and row["messages"][0]["content"] == "Book the Zanzibar tour."


def test_post_transcripts_after_forget_is_refused_with_the_reason(db: Database) -> None:
    secret = create_key(db, "acme", ("recall", "write", "admin"), name="acme")[1]
    records = [
        {k: v for k, v in _record(s, "Book the Zanzibar tour.").items() if k != "tenant_id"} for s in ("z-1", "z-2")
    ]
    import httpx

    with serve(db) as url, httpx.Client(base_url=url, headers={"Authorization": f"Bearer {secret}"}, timeout=30) as c:
        assert c.post("/v1/transcripts", json={"transcripts": records}).json()["accepted"] == 2
        assert c.delete("/v1/users/u-zoe").json()["counts"]["transcripts"] == 2
        again = c.post("/v1/transcripts", json={"transcripts": records}).json()
        assert again["accepted"] == 0 and again["rejected"] == 2
        # Refused, without the day of the erasure: a key that may ingest learns no more (issue 46, item 13).
        assert all(
            r["result"] == "rejected" and (r["reason"] or "").endswith("an erased session is not stored again")
            for r in again["results"]
        ), again
        assert "erased on" not in str(again), again
        new = {**records[0], "session_id": "z-9"}
        assert c.post("/v1/transcripts", json={"transcripts": [new]}).json()["accepted"] == 1
    assert _sessions(db) == [("u-zoe", "z-9")]


def test_a_hand_insert_of_an_erased_session_is_refused(db: Database, tmp_path: Path) -> None:
    path = tmp_path / "zoe.json"
    path.write_text(json.dumps([_record("z-1", "Book the Zanzibar tour.")]))
    assert _run("ingest", str(path)).exit_code == 0
    _forget("u-zoe")
    insert = (
        "INSERT INTO transcripts (tenant_id, user_id, session_id, messages, content_hash) "
        'VALUES (\'acme\', %s, %s, \'[{"role": "user", "content": "hi"}]\', \'x\')'
    )
    opens: list[Callable[[], AbstractContextManager[Conn]]] = [lambda: db.tenant("acme"), db.admin]
    for open_conn in opens:  # as the app role in the tenant, and as the owner
        with pytest.raises(psycopg.errors.IntegrityError) as refused, open_conn() as conn:
            conn.execute(insert, ("u-zoe", "z-1"))
        assert refused.value.sqlstate == "23000" and "erased on" in str(refused.value)
    with db.tenant("acme") as conn:
        conn.execute(insert, ("u-zoe", "z-2"))  # a new session
    assert _sessions(db) == [("u-zoe", "z-2")]
    # The tenant's role reads no key and cannot undo an erasure; the owner's tables hold hashes only.
    with db.tenant("acme") as conn:
        assert conn.execute("SELECT count(*) AS n FROM erasure_keys").fetchone() == {"n": 0}
        for statement in (
            "DELETE FROM erased_sessions",
            "UPDATE erasure_keys SET key = repeat('0', 64)",
            "INSERT INTO erasure_keys VALUES ('acme', repeat('0', 64))",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
                conn.execute(statement)
    with db.admin() as conn:
        rows = conn.execute("SELECT * FROM erased_sessions").fetchall()
    assert len(rows) == 1 and "z-1" not in json.dumps(rows, default=str)


def test_claude_code_sync_after_forget_stores_nothing_again(
    db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    sid = "aaaa-1111-erased"
    _old_session(tmp_path, sid, "/work/shop")
    save(sid, SessionState(ended=True, cwd="/work/shop"))  # what the SessionEnd hook leaves
    sync = ["claude-code", "sync", "--tenant", "acme", "--user", "ann"]
    first = _run(*sync)
    assert first.exit_code == 0 and "1 session stored" in first.stdout, first.output
    assert _sessions(db) == [("ann", sid)]
    ledger = Path(os.environ["EPISODES_HOME"]) / "claude-code" / "synced.json"
    assert sid in ledger.read_text()

    done = _forget("ann")
    session_file = tmp_path / ".claude" / "projects" / "-work-shop" / f"{sid}.jsonl"
    assert "removed 1 sync-ledger entry and 1 hook state file" in done.stdout, done.stdout
    assert (
        f"Claude Code still holds its own copies of 1 session file in {tmp_path / '.claude' / 'projects'}"
        in done.stdout
        and str(session_file) in done.stdout
    )
    assert sid not in ledger.read_text() and not (state_dir() / f"{sid}.json").exists()
    assert session_file.exists()  # Claude Code's own copy: named, not touched

    # The session is resumed (its file grows and is read whole again): still the erased session.
    with session_file.open("a") as f:
        f.write(
            json.dumps(
                {
                    "sessionId": sid,
                    "cwd": "/work/shop",
                    "isSidechain": False,
                    "type": "user",
                    "uuid": "u2",
                    "timestamp": "2026-11-20T10:05:00Z",
                    "message": {"role": "user", "content": "Resumed: where were we?"},
                }
            )
            + "\n"
        )
    again = _run(*sync)
    assert _sessions(db) == []
    assert "0 sessions stored" in again.stdout and "erased on" in again.stderr, again.output
    quiet = _run(*sync)  # said once: the file is not read again until it changes
    assert quiet.exit_code == 0 and "(1 unchanged since stored)" in quiet.stdout and quiet.stderr == "", quiet.output

    # The SessionEnd hook of the resumed session hands it over: refused, and the hook fails open.
    end = {
        "hook_event_name": "SessionEnd",
        "reason": "other",
        "session_id": sid,
        "cwd": "/work/shop",
        "transcript_path": str(session_file),
    }
    code = "import sys\nfrom jobs.claude_code import hook\nsys.exit(hook.main(sys.argv[1:]))\n"
    hook = subprocess.run(
        [sys.executable, "-c", code, "--tenant", "acme", "--user", "ann", "--budget", "60"],
        input=json.dumps(end),
        env={**os.environ, "DATABASE_URL": db.url},
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert hook.returncode == 0 and hook.stdout == "", hook.stderr
    assert "SessionEnd: failed open" in log_file().read_text() and "erased on" in log_file().read_text()
    assert _sessions(db) == []

    # A new session of the same user on this machine is stored (new turns: the helper's copy of the erased
    # turns, at their times, would be a fork of the erased session, whose turns are dropped).
    _old_session(tmp_path, "bbbb-2222-new", "/work/shop")
    fresh = tmp_path / ".claude" / "projects" / "-work-shop" / "bbbb-2222-new.jsonl"
    fresh.write_text(fresh.read_text().replace("2026-11-20T10:00", "2026-11-21T10:00"))
    new = _run(*sync)
    assert "1 session stored" in new.stdout, new.output
    assert _sessions(db) == [("ann", "bbbb-2222-new")]


def test_an_erasure_through_the_service_login_role_stays(db: Database, service_db: Database) -> None:
    """As `episodes api` and `serve`'s tenant work log in (episodes_service, owning nothing): the erasure
    records its sessions and the refusal holds, also on a Citus cluster, where the triggers run on the worker."""
    records = [("t:1", _record("z-1", "Book the Zanzibar tour."))]
    assert ingest_records(service_db, records).inserted == 1
    assert forget_user(service_db, "acme", "u-zoe").counts["transcripts"] == 1
    again = ingest_records(service_db, records)
    assert again.inserted == 0 and len(again.rejected) == 1 and "erased on" in str(again.rejected[0])
    assert ingest_records(service_db, [("t:2", _record("z-2", "A new session."))]).inserted == 1
    assert _sessions(db) == [("u-zoe", "z-2")]
