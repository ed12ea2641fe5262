"""A decision made in one real Claude Code session reaches the next session's request to the model (issue 36).

The real Claude Code CLI with our hooks installed by ``episodes claude-code install`` (local mode, a temporary
HOME), against a local stand-in for the Anthropic API that streams and records every request
(tests/support/stream_anthropic.py). Session 1's user prompt states a decision and a deadline; the SessionEnd hook hands
the session over; the offline extractor summarises it; session 2 starts in the same project, and the request
the CLI sends to the model must carry the decision with its specifics inside ``<previous_episodes>``. The
stand-in answers "Understood." so nothing of the decision comes from the model's side. Skipped, saying why,
when the CLI is not installed (see tests/test_claude_code_real_cli.py).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.claude_code_cli import CLAUDE, HOOK_BUDGET, MODEL_CACHE, Claude, needs_claude
from support.stream_anthropic import StreamAnthropic

from jobs.cli import cli
from jobs.db import Database

PROMPT = "Let's use PostgreSQL 17 for the billing service. Write the migration plan by Friday."


@pytest.fixture
def claude(tmp_path: Path, db: Database, monkeypatch: pytest.MonkeyPatch) -> Iterator[Claude]:
    """Hooks installed by `episodes claude-code install` (local mode) into a temporary HOME."""
    if CLAUDE is None:
        pytest.skip("the Claude Code CLI is not installed")
    home, project = tmp_path / "cc-home", tmp_path / "work" / "billing"
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
    with StreamAnthropic(reply="Understood.") as stand_in:
        yield Claude(home, project, stand_in, env)


def _summarise(db: Database) -> int:
    from jobs.embeddings import get_embedder
    from jobs.extract.offline import OfflineExtractor
    from jobs.summarize import run_summarize

    embedder = get_embedder("minilm", cache_dir=Path(MODEL_CACHE))
    return run_summarize(db, extractor=OfflineExtractor(embedder), embedder=embedder).done


@needs_claude
@pytest.mark.slow
def test_session_1s_decision_reaches_session_2s_request_with_its_specifics(claude: Claude, db: Database) -> None:
    first = claude.run(PROMPT)
    assert first.returncode == 0, first.stderr
    assert _summarise(db) == 1, "the SessionEnd hook handed session 1 over and it was summarised"
    with db.tenant("acme") as conn:
        events = conn.execute("SELECT type, what FROM episode_events ORDER BY id").fetchall()
    decisions = [e["what"] for e in events if e["type"] == "decision"]
    assert "The user decided to use PostgreSQL 17 for the billing service." in decisions, events

    second = claude.run("What's next for the billing service?")
    assert second.returncode == 0, second.stderr
    asked = json.loads(claude.stand_in.messages()[-1].text())  # the system prompt and messages, unescaped
    text = json.dumps(asked, ensure_ascii=False).replace('\\"', '"')
    start, end = text.find("<previous_episodes"), text.find("</previous_episodes>")
    assert 0 <= start < end, "session 2's request carries the recall block"
    block = text[start:end]
    assert "PostgreSQL 17" in block and "billing service" in block, block
    assert "decided to use PostgreSQL 17 for the billing service" in block, block
