"""Claude Code hooks in remote mode, through `episodes api`: the hand-over, the block injected once, and
PreCompact handing over open what SessionEnd then closes."""

from __future__ import annotations

import json
from pathlib import Path

from support.claude_code_cli import (
    DECISION,
    _at,
    _hook,
    _session_file,
    _stored,
    _summarise,
)

from jobs.claude_code import session_state
from jobs.claude_code.places import log_file, project_purpose
from jobs.db import Database

# --- remote mode: the hooks through `episodes api` ----------------------------------------------------


def test_remote_mode_hands_over_through_the_api_and_injects_its_block_once(tmp_path: Path, db: Database) -> None:
    from support.api_server import serve

    from jobs.service.keys import create_key

    _, secret = create_key(db, "acme", ["recall", "ingest"], name="claude code")
    project = str(tmp_path / "shop-api")
    file = _session_file(tmp_path / "projects" / "shop", "11111111-aaaa", project, DECISION)
    env = {"EPISODES_API_KEY": secret}
    with serve(db) as api:
        args = ("--user", "ann", "--api", api, "--budget", "60")
        end = {
            "hook_event_name": "SessionEnd",
            "reason": "other",
            "session_id": "11111111-aaaa",
            "cwd": project,
            "transcript_path": str(file),
        }
        done, _ = _hook(end, *args, env=env)
        assert done.returncode == 0 and done.stdout == "", done.stderr
        assert "failed open" not in log_file().read_text() and "SessionEnd: ok in" in log_file().read_text()
        stored = _stored(db)
        assert [(r["session_id"], r["purpose"]) for r in stored] == [("11111111-aaaa", project_purpose(project))]
        assert stored[0]["ended_at"] is not None and "previous_episodes" not in stored[0]["messages"]
        assert _summarise(db) == 1
        assert _hook(end, *args, env=env)[0].returncode == 0  # handed over again: unchanged, not re-summarised
        assert _summarise(db) == 0

        start = {
            "hook_event_name": "SessionStart",
            "source": "startup",
            "session_id": "22222222-bbbb",
            "cwd": project,
            "transcript_path": str(tmp_path / "none.jsonl"),
        }
        shown, _ = _hook(start, *args, env=env)
        assert shown.returncode == 0 and shown.stdout.startswith("<previous_episodes"), shown.stdout
        assert "pgvector" in shown.stdout.lower() and "clearly relates" not in shown.stdout
        assert session_state.load("22222222-bbbb").episodes, "what was injected is remembered"

        prompt = {**start, "hook_event_name": "UserPromptSubmit", "prompt": "Which database did we choose?"}
        again, _ = _hook(prompt, *args, env=env)
        assert again.returncode == 0 and again.stdout == "", "the one relevant episode was injected at start already"
        assert session_state.load("22222222-bbbb").prompted

        other = {**start, "session_id": "33333333-cccc", "cwd": str(tmp_path / "another-project")}
        assert "pgvector" not in _hook(other, *args, env=env)[0].stdout  # another project's sessions stay out

        wrong, _ = _hook(start, *args, env={"EPISODES_API_KEY": "ep_" + "x" * 43})
        assert wrong.returncode == 0 and wrong.stdout == ""
        assert "answered 401" in log_file().read_text()


def test_precompact_hands_over_open_and_sessionend_closes_the_same_transcript(tmp_path: Path, db: Database) -> None:
    """Local mode: PreCompact stores the session so far, still open; SessionEnd replaces it, closed."""
    project = str(tmp_path / "shop-api")
    file = _session_file(tmp_path / "projects" / "shop", "44444444-dddd", project, DECISION)
    env = {"DATABASE_URL": db.url}
    args = ("--tenant", "acme", "--user", "ann", "--budget", "60")
    base = {"session_id": "44444444-dddd", "cwd": project, "transcript_path": str(file)}
    done, _ = _hook({**base, "hook_event_name": "PreCompact", "trigger": "auto"}, *args, env=env)
    assert done.returncode == 0, log_file().read_text()
    stored = _stored(db)
    assert [(r["session_id"], r["ended_at"]) for r in stored] == [("44444444-dddd", None)]
    later = _at(60)
    with file.open("a") as handle:  # the session goes on after the compaction
        handle.write(
            json.dumps(
                {
                    "type": "user",
                    "sessionId": "44444444-dddd",
                    "cwd": project,
                    "timestamp": later,
                    "message": {"role": "user", "content": "And add an index on user_id."},
                }
            )
            + "\n"
        )
    done, _ = _hook({**base, "hook_event_name": "SessionEnd", "reason": "prompt_input_exit"}, *args, env=env)
    assert done.returncode == 0, log_file().read_text()
    stored = _stored(db)
    assert len(stored) == 1 and stored[0]["ended_at"] is not None
    assert stored[0]["ended_at"].isoformat().startswith(later[:19])  # its last message, not the hook's time
    assert "index on user_id" in stored[0]["messages"]
    assert session_state.load("44444444-dddd").ended
