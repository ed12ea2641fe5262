"""A session ended and one started through the real hook processes, in a folder of a git repository
(what tests/test_repository_recall.py and tests/test_repository_service.py share)."""

from __future__ import annotations

import os
from pathlib import Path

from jobs.db import Database
from support.claude_code_cli import _hook, _session_file, _summarise

ARGS = ("--tenant", "acme", "--user", "ann", "--budget", "60")


def _args(user: str) -> tuple[str, ...]:
    return tuple(user if a == "ann" else a for a in ARGS)


def end_session(db: Database, sid: str, cwd: Path, said: str, tmp_path: Path, user: str = "ann") -> None:
    file = _session_file(tmp_path / "projects" / sid, sid, str(cwd), said)
    payload = {"hook_event_name": "SessionEnd", "reason": "other", "session_id": sid, "cwd": str(cwd)}
    done, _ = _hook({**payload, "transcript_path": str(file)}, *_args(user), env={"DATABASE_URL": db.url})
    assert done.returncode == 0, done.stderr
    assert _summarise(db) == 1


def start_session(db: Database, sid: str, cwd: Path, user: str = "ann") -> str:
    payload = {"hook_event_name": "SessionStart", "source": "startup", "session_id": sid, "cwd": str(cwd)}
    done, _ = _hook({**payload, "transcript_path": os.devnull}, *_args(user), env={"DATABASE_URL": db.url})
    assert done.returncode == 0, done.stderr
    return done.stdout
