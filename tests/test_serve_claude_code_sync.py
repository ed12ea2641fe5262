"""`episodes serve --claude-code-sync`: the Claude Code sessions on this machine that no SessionEnd hook
handed over (database down, a killed terminal) are stored by serve's scheduler, as `episodes claude-code
sync` stores them, and a second round stores nothing again."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from support.claude_code_cli import _old_session

from jobs.db import Database, one
from jobs.embeddings import get_embedder
from jobs.extract.offline import OfflineExtractor
from jobs.serve import ServeOptions, Server


def test_serve_stores_claude_code_sessions_no_hook_handed_over(
    tmp_path: Path, db: Database, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    _old_session(tmp_path, "aaaa-1111", "/work/shop")
    extractor = OfflineExtractor(get_embedder("minilm"))
    server = Server(db, extractor, ServeOptions(concurrency=1, idle_close_seconds=1800, claude_code=("acme", "ann")))
    with caplog.at_level(logging.INFO, logger="jobs.serve"):
        server.claude_code_sync()
    with db.tenant("acme") as conn:
        rows = conn.execute("SELECT user_id, session_id, ended_at IS NOT NULL AS closed FROM transcripts").fetchall()
    assert [(r["user_id"], r["session_id"], r["closed"]) for r in rows] == [("ann", "aaaa-1111", True)]
    assert any(
        getattr(r, "action", None) == "claude_code_sync" and getattr(r, "stored", 0) == 1 for r in caplog.records
    )
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="jobs.serve"):
        server.claude_code_sync()  # nothing new: nothing stored, nothing logged
    assert not [r for r in caplog.records if getattr(r, "action", None) == "claude_code_sync"]
    with db.tenant("acme") as conn:
        assert one(conn.execute("SELECT count(*) AS n FROM transcripts"))["n"] == 1


def test_serve_without_the_flag_syncs_nothing(tmp_path: Path, db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    _old_session(tmp_path, "bbbb-2222", "/work/shop")
    server = Server(db, OfflineExtractor(get_embedder("minilm")), ServeOptions(concurrency=1))
    server.claude_code_sync()
    with db.tenant("local") as conn:
        assert one(conn.execute("SELECT count(*) AS n FROM transcripts"))["n"] == 0
