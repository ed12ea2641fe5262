"""The Claude Agent SDK example (examples/agent_sdk_memory.py), run as a user runs it.

The example is started as its own process; the SDK drives the real Claude Code CLI against the
streaming stand-in for the Anthropic API (tests/support/stream_anthropic.py), which records what the model
was asked. Session 1 states a decision and is handed over; summarised offline, it is in session 2's
system prompt inside ``<previous_episodes>``, and no recall block is ever stored as conversation.
Skipped, saying why, without ``claude-agent-sdk`` (the test extra) or a Claude Code CLI: the SDK's
wheel bundles one; EPISODES_CLAUDE_BIN, ``claude`` on PATH or the repository's node_modules/.bin
name another.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs
import pytest
from click.testing import CliRunner
from support.stream_anthropic import StreamAnthropic

from jobs.cli import cli
from jobs.db import Database
from jobs.formats.claude_code import project_purpose

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "agent_sdk_memory.py"
HAS_SDK = importlib.util.find_spec("claude_agent_sdk") is not None
# Read at import, before the fixtures clear EPISODES_* from the environment.
MODEL_CACHE = os.environ.get("EPISODES_CACHE_DIR") or platformdirs.user_cache_dir("episodes")
DECISION = "We decided to use PostgreSQL with pgvector as the memory store, not SQLite."
REPLY = "Noted: PostgreSQL with pgvector it is."


def _find_claude() -> str | None:
    """$EPISODES_CLAUDE_BIN, `claude` on PATH, node_modules/.bin under the repository, or the SDK's bundled CLI."""
    candidates = [
        os.environ.get("EPISODES_CLAUDE_BIN"),
        shutil.which("claude"),
        str(ROOT / "node_modules" / ".bin" / "claude"),
    ]
    if HAS_SDK:
        spec = importlib.util.find_spec("claude_agent_sdk")
        if spec is not None and spec.origin:
            candidates.append(str(Path(spec.origin).parent / "_bundled" / "claude"))
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


CLAUDE = _find_claude()
pytestmark = [
    pytest.mark.slow,  # real Claude Code sessions
    pytest.mark.skipif(not HAS_SDK, reason="claude-agent-sdk is not installed (pip install -e '.[test]')"),
    pytest.mark.skipif(
        CLAUDE is None,
        reason="no Claude Code CLI: claude-agent-sdk's wheel bundles one; or set "
        "EPISODES_CLAUDE_BIN, or `npm install @anthropic-ai/claude-code`",
    ),
]


@dataclass
class Agent:
    """Runs the example in a project folder under a temporary HOME against the stand-in."""

    home: Path
    project: Path
    stand_in: StreamAnthropic
    database_url: str

    def run(self, prompt: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        assert CLAUDE is not None
        full = {
            **os.environ,
            "HOME": str(self.home),
            "ANTHROPIC_BASE_URL": self.stand_in.base_url,
            "ANTHROPIC_API_KEY": "test",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DATABASE_URL": self.database_url,
            "EPISODES_CACHE_DIR": MODEL_CACHE,
            **env,
        }
        return subprocess.run(
            [sys.executable, str(EXAMPLE), "--user", "ann", "--cli-path", CLAUDE, *args, prompt],
            cwd=self.project,
            env=full,
            capture_output=True,
            text=True,
            timeout=300,
        )

    def asked(self, prompt: str) -> dict[str, Any]:
        """The request body of the turn that answered ``prompt`` (the CLI may make other requests)."""
        found = [r.body for r in self.stand_in.messages() if prompt in r.text()]
        assert found, f"the model was never asked {prompt!r}"
        body: dict[str, Any] = found[-1]
        return body


@pytest.fixture
def agent(tmp_path: Path, db: Database, monkeypatch: pytest.MonkeyPatch) -> Iterator[Agent]:
    home, project = tmp_path / "sdk-home", tmp_path / "work" / "shop-api"
    project.mkdir(parents=True)
    (home / ".claude").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))  # for `episodes claude-code sync` run in this process
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    with StreamAnthropic(reply=REPLY) as stand_in:
        yield Agent(home, project, stand_in, db.url)


def _stored(db: Database, tenant: str = "acme") -> list[dict[str, Any]]:
    with db.tenant(tenant) as conn:
        return conn.execute(
            "SELECT session_id, purpose, ended_at, messages::text AS messages FROM transcripts ORDER BY id"
        ).fetchall()


def _summarise(db: Database) -> int:
    from jobs.embeddings import get_embedder
    from jobs.extract.offline import OfflineExtractor
    from jobs.summarize import run_summarize

    embedder = get_embedder("minilm", cache_dir=Path(MODEL_CACHE))
    return run_summarize(db, extractor=OfflineExtractor(embedder), embedder=embedder).done


def _block(body: dict[str, Any]) -> str:
    """The ``<previous_episodes>`` block in a request's system prompt ("" if none)."""
    system = body.get("system")
    text = (
        system
        if isinstance(system, str)
        else "".join(part.get("text", "") for part in system or [] if isinstance(part, dict))
    )
    start, end = text.find("<previous_episodes"), text.find("</previous_episodes>")
    return text[start : end + len("</previous_episodes>")] if 0 <= start < end else ""


def _second_session_remembers(agent: Agent, db: Database, *args: str, **env: str) -> None:
    first = agent.run(DECISION, *args, **env)
    assert first.returncode == 0, first.stderr
    assert REPLY in first.stdout
    assert "handed over" in first.stderr, first.stderr
    assert "pgvector" not in _block(agent.asked(DECISION)).lower(), "nothing to remember yet"
    stored = _stored(db)
    assert len(stored) == 1
    assert stored[0]["ended_at"] is not None, "closed, so it is summarised"
    assert stored[0]["purpose"] == project_purpose(str(agent.project))
    assert "pgvector" in stored[0]["messages"]
    assert _summarise(db) == 1

    question = "Which database do we use for the memory store?"
    second = agent.run(question, *args, **env)
    assert second.returncode == 0, second.stderr
    block = _block(agent.asked(question))
    assert block, "session 2's system prompt carries the recall block"
    assert "pgvector" in block.lower() and "postgresql" in block.lower(), block
    assert question not in str(agent.asked(question).get("system")), "the prompt stays in the conversation"

    stored = _stored(db)
    assert len(stored) == 2 and all(row["ended_at"] is not None for row in stored)
    assert sum(row["messages"].count("previous_episodes") for row in stored) == 0, "memory never stored as talk"
    assert _summarise(db) == 1  # session 2; session 1 is not summarised again


@pytest.mark.slow
def test_example_help() -> None:
    done = subprocess.run([sys.executable, str(EXAMPLE), "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "--tenant" in done.stdout and "--api" in done.stdout and "--cli-path" in done.stdout


@pytest.mark.slow
def test_sdk_session_2_sees_session_1s_decision_local_mode(agent: Agent, db: Database) -> None:
    _second_session_remembers(agent, db, "--tenant", "acme")


@pytest.mark.slow
def test_sdk_session_2_sees_session_1s_decision_through_episodes_api(agent: Agent, db: Database) -> None:
    from support.api_server import serve

    from jobs.service.keys import create_key

    _, secret = create_key(db, "acme", ["recall", "ingest"], name="agent sdk")
    with serve(db) as api:
        # No DATABASE_URL for the agent: everything goes through the service.
        _second_session_remembers(
            agent, db, "--api", api, "--key-env", "MY_EPISODES_KEY", DATABASE_URL="", MY_EPISODES_KEY=secret
        )


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_sdk_agent_answers_with_the_database_down_and_sync_stores_the_session_after(agent: Agent, db: Database) -> None:
    down = f"postgresql://nobody@127.0.0.1:{_closed_port()}/none?connect_timeout=2"
    done = agent.run(DECISION, "--tenant", "acme", DATABASE_URL=down)
    assert done.returncode == 0, done.stderr
    assert REPLY in done.stdout
    assert "memory not loaded" in done.stderr and "session not handed over" in done.stderr, done.stderr
    assert _stored(db) == []

    result = CliRunner().invoke(cli, ["claude-code", "sync", "--tenant", "acme", "--user", "ann"])
    assert result.exit_code == 0, result.output
    assert "1 session stored" in result.output, result.output
    stored = _stored(db)
    assert len(stored) == 1 and stored[0]["ended_at"] is not None and "pgvector" in stored[0]["messages"]
