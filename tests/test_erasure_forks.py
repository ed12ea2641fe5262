"""An erasure covers forks (issue 46, item 6).

`claude --resume <id> --fork-session` starts a session with a new id whose file copies the earlier
conversation's lines (their uuids, times and text; only ``sessionId`` is the new one) and goes on from
there. Refused by session id alone, the erased turns came back with the next `claude-code sync` of the fork.
Now the erased turns are dropped from the fork (its new turns are stored), and a fork that holds nothing
else is refused like the erased session. Through the real `episodes` commands on a real database, with a
session file in Claude Code's format: the real one of ../shared/data/claude-code when it is there, and one
written here in the same shape.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from jobs.cli import cli
from jobs.db import Database

pytestmark = pytest.mark.citus  # runs on one PostgreSQL and on the Citus cluster (conftest)

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "claude-code"
PROJECT = "-work-shop"
NEW_TURNS = ("After the fork: call the nightly job ledger-sweep.", "Renamed the job to ledger-sweep.")


def _line(sid: str, kind: str, uuid: str, parent: str | None, ts: str, content: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"role": kind, "content": content}
    if kind == "assistant":
        message["id"] = f"msg-{uuid}"
    return {
        "parentUuid": parent,
        "isSidechain": False,
        "userType": "external",
        "cwd": "/work/shop",
        "sessionId": sid,
        "version": "2.1.332",
        "gitBranch": "main",
        "type": kind,
        "message": message,
        "uuid": uuid,
        "timestamp": ts,
    }


def _written_here(sid: str) -> list[dict[str, Any]]:
    return [
        _line(sid, "user", "u-1", None, "2026-11-20T10:00:00.000Z", "Keep the Zanzibar invoices for 7 years."),
        _line(sid, "assistant", "a-1", "u-1", "2026-11-20T10:00:04.000Z", [{"type": "text", "text": "Set to 7."}]),
        _line(sid, "user", "u-2", "a-1", "2026-11-20T10:01:00.000Z", "And name the export job quokka-nightly."),
        _line(sid, "assistant", "a-2", "u-2", "2026-11-20T10:01:03.000Z", [{"type": "text", "text": "Named it."}]),
    ]


def _session(source: str, sid: str) -> list[dict[str, Any]]:
    if source == "written here":
        return _written_here(sid)
    path = SHARED / source
    if not path.is_file():
        pytest.skip(f"{path} is not beside the repository (it is not shipped with it)")
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def _fork(original: list[dict[str, Any]], fork_id: str, *, new_turns: bool) -> list[dict[str, Any]]:
    """What --fork-session writes: the earlier lines with the new session id (uuids and times kept), then
    the new turns, a day after the last earlier line."""
    lines = [{**line, "sessionId": fork_id} if "sessionId" in line else line for line in original]
    if new_turns:
        last = max(line["timestamp"] for line in original if "timestamp" in line)
        day = f"{int(last[8:10]) + 1:02d}"
        parent = next(line["uuid"] for line in reversed(original) if "uuid" in line)
        ask, answer = NEW_TURNS
        lines += [
            {
                **_line(fork_id, "user", "f-1", parent, f"{last[:8]}{day}T08:00:00.000Z", ask),
                "cwd": original_cwd(lines),
            },
            {
                **_line(
                    fork_id,
                    "assistant",
                    "f-2",
                    "f-1",
                    f"{last[:8]}{day}T08:00:02.000Z",
                    [{"type": "text", "text": answer}],
                ),
                "cwd": original_cwd(lines),
            },
        ]
    return lines


def original_cwd(lines: list[dict[str, Any]]) -> str:
    return str(next((line["cwd"] for line in lines if "cwd" in line), "/work/shop"))


def _write(home: Path, sid: str, lines: list[dict[str, Any]]) -> Path:
    path = home / ".claude" / "projects" / PROJECT / f"{sid}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def _stored(db: Database) -> dict[str, list[str]]:
    with db.tenant("acme") as conn:
        return {
            r["session_id"]: [m["content"] for m in r["messages"]]
            for r in conn.execute("SELECT session_id, messages FROM transcripts WHERE tenant_id = 'acme'")
        }


@pytest.mark.parametrize("source", ["written here", "spotter-short.jsonl"])
def test_a_fork_of_an_erased_session_brings_no_erased_turn_back(
    db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    sync = ["claude-code", "sync", "--tenant", "acme", "--user", "ann"]
    original = _session(source, "orig-0001")
    sid = original_sid = next(line["sessionId"] for line in original if "sessionId" in line)
    _write(tmp_path, sid, original)
    first = _run(*sync)
    assert first.exit_code == 0 and "1 session stored" in first.stdout, first.output
    erased_turns = _stored(db)[original_sid]
    assert erased_turns, "setup: the session should have messages"

    done = _run("forget", "--tenant", "acme", "--user", "ann", "--no-vacuum")
    assert done.exit_code == 0 and "erased 1 transcript" in done.stdout, done.output

    # The fork holds the erased turns and two new ones: only the new ones are stored.
    _write(tmp_path, "fork-0002", _fork(original, "fork-0002", new_turns=True))
    # A fork made and left without a new turn: nothing of it is stored, and it says why.
    _write(tmp_path, "fork-0003", _fork(original, "fork-0003", new_turns=False))
    again = _run(*sync)
    assert "1 session stored" in again.stdout, again.output
    assert "fork-0003.jsonl:1: database refused the record: session fork-0003 repeats only erased messages" in (
        again.stderr
    ), again.output
    assert _stored(db) == {"fork-0002": list(NEW_TURNS)}

    quiet = _run(*sync)  # the refusal is said once: the file is not read again until it changes
    assert quiet.stderr == "" and "0 sessions stored" in quiet.stdout, quiet.output
