"""Claude Code integration through the real CLI: a second session sees the first one's decision, no injected
block is stored, and a session run with the database down is stored by sync after.

The real-client tests run the Claude Code CLI (npm ``@anthropic-ai/claude-code``) with our hooks
installed by ``episodes claude-code install`` into a temporary HOME, against a local stand-in for
the Anthropic API that streams (tests/support/stream_anthropic.py). They are skipped, saying why, when the
CLI is not found: set EPISODES_CLAUDE_BIN, put ``claude`` on PATH, or ``npm install
@anthropic-ai/claude-code`` in the repository (node_modules/.bin/claude)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.claude_code_cli import (
    CLAUDE,
    DECISION,
    HOOK_BUDGET,
    MODEL_CACHE,
    Claude,
    _closed_port,
    _stored,
    _summarise,
    needs_claude,
)
from support.stream_anthropic import StreamAnthropic

from jobs.claude_code import session_state
from jobs.claude_code.places import log_file, project_purpose
from jobs.cli import cli
from jobs.db import Database

# --- the real Claude Code CLI ------------------------------------------------------------------------


@pytest.fixture
def claude(tmp_path: Path, db: Database, monkeypatch: pytest.MonkeyPatch) -> Iterator[Claude]:
    """Hooks installed by `episodes claude-code install` (local mode) into a temporary HOME."""
    if CLAUDE is None:
        pytest.skip("the Claude Code CLI is not installed")
    home, project = tmp_path / "cc-home", tmp_path / "work" / "shop-api"
    project.mkdir(parents=True)
    (home / ".claude").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.setenv("EPISODES_CACHE_DIR", MODEL_CACHE)
    result = CliRunner().invoke(
        cli, ["claude-code", "install", "--tenant", "acme", "--user", "ann", "--budget", str(HOOK_BUDGET)]
    )
    assert result.exit_code == 0, result.output
    env = {"DATABASE_URL": db.url, "EPISODES_CACHE_DIR": MODEL_CACHE, "EPISODES_HOME": os.environ["EPISODES_HOME"]}
    with StreamAnthropic(reply="Noted: PostgreSQL with pgvector it is.") as stand_in:
        yield Claude(home, project, stand_in, env)


@needs_claude
@pytest.mark.slow
def test_real_claude_code_session_2_sees_session_1s_decision_and_no_injected_block_is_stored(
    claude: Claude, db: Database
) -> None:
    first = claude.run(DECISION)
    assert first.returncode == 0, first.stderr
    assert "PostgreSQL with pgvector it is" in first.stdout
    stored = _stored(db)
    assert len(stored) == 1, "the SessionEnd hook handed session 1 over"
    one = stored[0]
    assert one["ended_at"] is not None and one["agent_id"] == "claude-code"
    assert one["purpose"] == project_purpose(str(claude.project))
    assert "pgvector" in one["messages"]
    assert _summarise(db) == 1

    second = claude.run("Which database do we use for the memory store?")
    assert second.returncode == 0, second.stderr
    asked = claude.stand_in.messages()[-1].text()
    start, end = asked.find("<previous_episodes"), asked.find("</previous_episodes>")
    assert 0 <= start < end, "session 2's request carries the recall block"
    block = asked[start:end]
    assert "pgvector" in block.lower() and "postgresql" in block.lower(), block
    assert "clearly relates to the opening message" not in block  # there was none at session start
    # The first prompt's hook found that episode relevant, but SessionStart had injected it already.
    assert asked.count("<previous_episodes") == 1

    # Claude Code recorded the injected block in session 2's file; none of it is stored.
    files = claude.session_files()
    assert len(files) == 2 and "<previous_episodes" in files[-1].read_text()
    stored = _stored(db)
    assert len(stored) == 2
    assert sum(row["messages"].count("previous_episodes") for row in stored) == 0
    assert sum(row["messages"].count("Quotes from earlier sessions") for row in stored) == 0

    # Handing the same sessions over again (sync) changes nothing: summarised exactly once.
    again = CliRunner().invoke(cli, ["claude-code", "sync", "--tenant", "acme", "--user", "ann", "--all"])
    assert again.exit_code == 0, again.output
    assert "0 sessions stored, 2 already stored" in again.output
    assert _summarise(db) == 1  # session 2 only
    with db.tenant("acme") as conn:
        episodes = conn.execute("SELECT session_id FROM episodes WHERE kind = 'session'").fetchall()
    assert sorted(e["session_id"] for e in episodes) == sorted(row["session_id"] for row in stored)


@needs_claude
@pytest.mark.slow
def test_real_claude_code_session_runs_with_the_database_down_and_sync_stores_it_after(
    claude: Claude, db: Database
) -> None:
    down = f"postgresql://nobody@127.0.0.1:{_closed_port()}/none?connect_timeout=2"
    done = claude.run(DECISION, DATABASE_URL=down)
    assert done.returncode == 0, done.stderr
    assert "PostgreSQL with pgvector it is" in done.stdout
    assert _stored(db) == []
    log = log_file().read_text()
    # Each hook failed open on the database it could not reach (the pool's connect wait, 2 s), none by waiting out
    # its budget (the watchdog's "gave up after"); bench/hook_latency.py times the hooks.
    failed = [line for line in log.splitlines() if "failed open" in line]
    assert any("SessionStart: failed open" in line for line in failed), log
    assert any("SessionEnd: failed open" in line for line in failed), log
    assert all("DatabaseError: Could not connect" in line for line in failed) and "gave up after" not in log, log
    sid = claude.session_files()[0].stem
    assert session_state.load(sid).ended, "the SessionEnd hook noted the end before failing"

    result = CliRunner().invoke(cli, ["claude-code", "sync", "--tenant", "acme", "--user", "ann"])
    assert result.exit_code == 0, result.output
    assert "1 session stored" in result.output
    stored = _stored(db)
    assert [row["session_id"] for row in stored] == [sid]
    assert stored[0]["ended_at"] is not None, "closed, so serve summarises it"
    assert (
        "1 unchanged since stored"
        in CliRunner().invoke(cli, ["claude-code", "sync", "--tenant", "acme", "--user", "ann"]).output
    )
