"""Where each Claude Code session happened in git (issue 49): branch, HEAD at its end, worktree, repository.

The SessionEnd hook (a real hook process, local mode) records the place in the session's state and
hands it over in the transcript's metadata; `episodes claude-code sync` stores the same record, so a
session is never summarised twice because a commit came after it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from support.claude_code_cli import DECISION, _hook, _session_file
from support.git_repos import Scene, commit, scene

from jobs.claude_code import session_state
from jobs.cli import cli
from jobs.db import Database
from jobs.formats.claude_code import project_purpose
from jobs.repository.identity import place_of


def _metadata(db: Database, session_id: str) -> dict[str, Any]:
    with db.tenant("acme") as conn:
        row = conn.execute(
            "SELECT purpose, metadata, content_hash FROM transcripts WHERE session_id = %s", (session_id,)
        ).fetchone()
    assert row is not None, f"session {session_id} was not stored"
    return {"purpose": row["purpose"], "hash": row["content_hash"], **(row["metadata"] or {})}


def _end(sid: str, cwd: Path, file: Path) -> dict[str, str]:
    return {
        "hook_event_name": "SessionEnd",
        "reason": "other",
        "session_id": sid,
        "cwd": str(cwd),
        "transcript_path": str(file),
    }


@pytest.mark.citus
def test_the_session_end_hook_records_branch_head_and_worktree_and_sync_stores_the_same(
    tmp_path: Path, db: Database
) -> None:
    repos: Scene = scene(tmp_path)
    tip = commit(repos.wt_a, "a.txt")
    file = _session_file(tmp_path / "projects" / "app-a", "sess-a", str(repos.wt_a), DECISION)
    done, _ = _hook(_end("sess-a", repos.wt_a, file), "--tenant", "acme", "--user", "ann", env={"DATABASE_URL": db.url})
    assert done.returncode == 0, done.stderr
    stored = _metadata(db, "sess-a")
    place = place_of(str(repos.main))
    assert place is not None
    assert stored["purpose"] == project_purpose(str(repos.main))  # the worktree's memory is the repository's
    assert (stored["git_branch"], stored["git_head"], stored["git_worktree"], stored["git_repo"]) == (
        "feat/a",
        tip,
        os.path.realpath(repos.wt_a),
        place.identity,
    )
    assert session_state.load("sess-a").git["git_head"] == tip

    commit(repos.wt_a, "later.txt")  # HEAD moves after the session ended
    synced = CliRunner().invoke(
        cli, ["claude-code", "sync", "--tenant", "acme", "--user", "ann", "--all", "--root", str(tmp_path / "projects")]
    )
    assert synced.exit_code == 0, synced.output
    assert "0 sessions stored, 1 already stored" in synced.output, synced.output
    assert _metadata(db, "sess-a") == stored


def _old_session(folder: Path, sid: str, cwd: Path, branch: str) -> Path:
    """A finished session file (a day idle) whose lines name the branch, as Claude Code writes them."""
    path = folder / f"{sid}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    common = {"sessionId": sid, "cwd": str(cwd), "gitBranch": branch, "isSidechain": False, "version": "2.1.332"}
    lines = [
        {
            **common,
            "type": "user",
            "timestamp": "2026-11-20T10:00:00Z",
            "message": {"role": "user", "content": DECISION},
        },
        {
            **common,
            "type": "assistant",
            "timestamp": "2026-11-20T10:00:05Z",
            "message": {"id": "m1", "role": "assistant", "content": [{"type": "text", "text": "Noted."}]},
        },
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


@pytest.mark.citus
def test_sync_of_a_session_no_hook_saw_keeps_the_files_branch_and_records_no_head(tmp_path: Path, db: Database) -> None:
    repos = scene(tmp_path)
    _old_session(tmp_path / "projects" / "app-b", "sess-b", repos.wt_b, "feat/b")
    synced = CliRunner().invoke(
        cli, ["claude-code", "sync", "--tenant", "acme", "--user", "ann", "--root", str(tmp_path / "projects")]
    )
    assert synced.exit_code == 0, synced.output
    stored = _metadata(db, "sess-b")
    assert stored["purpose"] == project_purpose(str(repos.main))
    assert stored["git_branch"] == "feat/b"
    assert "git_head" not in stored and "git_worktree" not in stored
