"""An empty session file is skipped with a note, not rejected (issue 46, finding 22). Claude Code leaves
empty ``.jsonl`` files behind (a session opened and left at once); `episodes ingest` of the projects
folder counted each as a rejected record ("expected a JSON object or array of transcripts") and exited 1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jobs.config import Settings

RECORD = {
    "tenant_id": "acme",
    "user_id": "u1",
    "session_id": "s-1",
    "ended_at": "2025-01-02T10:00:00Z",
    "messages": [{"role": "user", "content": "We settle on PostgreSQL 18."}],
}


@pytest.mark.parametrize("fmt", ["auto", "claude-code"])
def test_empty_jsonl_files_are_skipped_with_a_note_not_rejected(settings: Settings, tmp_path: Path, fmt: str) -> None:
    folder = tmp_path / "projects"
    folder.mkdir()
    (folder / "empty.jsonl").write_bytes(b"")
    (folder / "blank.jsonl").write_bytes(b"\xef\xbb\xbf\n  \n")
    if fmt == "auto":
        (folder / "good.jsonl").write_text(json.dumps(RECORD) + "\n")
    done = subprocess.run(
        [sys.executable, "-m", "jobs.cli", "ingest", "--format", fmt, str(folder)],
        env={**os.environ, "DATABASE_URL": settings.database_url or ""},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "rejected 0" in done.stdout and "rejected /" not in done.stderr, done.stdout + done.stderr
    for name in ("empty.jsonl", "blank.jsonl"):
        assert f"skipped {folder / name}: the file is empty" in done.stderr, done.stderr
    if fmt == "auto":
        assert "ingested 1 transcript" in done.stdout, done.stdout
