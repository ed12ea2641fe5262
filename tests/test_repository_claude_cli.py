"""The real Claude Code CLI through our hooks in two worktrees of one repository (issue 49).

Hooks installed by `episodes claude-code install` (local mode) into a temporary HOME; `claude -p` runs
against the streaming stand-in (tests/support/stream_anthropic.py). Session 1's decision on ``main``
reaches session 2 in the ``feat/a`` worktree's request; a decision made on the unmerged ``feat/b``
reaches a later session on ``main`` only as "pending on `feat/b`".
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.claude_code_cli import CLAUDE, DECISION, HOOK_BUDGET, MODEL_CACHE, Claude, _summarise, needs_claude
from support.git_repos import Scene, commit, scene
from support.stream_anthropic import StreamAnthropic

from jobs.cli import cli
from jobs.db import Database

NAMING = "We decided to name the queue table job_inbox, not jobs_queue."


@pytest.fixture
def worktrees(tmp_path: Path, db: Database, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Scene, Claude]]:
    if CLAUDE is None:
        pytest.skip("the Claude Code CLI is not installed")
    home = tmp_path / "cc-home"
    (home / ".claude").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.setenv("EPISODES_CACHE_DIR", MODEL_CACHE)
    installed = CliRunner().invoke(
        cli, ["claude-code", "install", "--tenant", "acme", "--user", "ann", "--budget", str(HOOK_BUDGET)]
    )
    assert installed.exit_code == 0, installed.output
    repos = scene(tmp_path / "git")
    env = {"DATABASE_URL": db.url, "EPISODES_CACHE_DIR": MODEL_CACHE, "EPISODES_HOME": os.environ["EPISODES_HOME"]}
    with StreamAnthropic(reply="Noted.") as stand_in:
        yield repos, Claude(home, repos.main, stand_in, env)


def _asked_block(claude: Claude) -> str:
    asked = claude.stand_in.messages()[-1].text()
    start, end = asked.find("<previous_episodes"), asked.find("</previous_episodes>")
    return asked[start:end] if 0 <= start < end else ""


@needs_claude
@pytest.mark.slow
def test_a_decision_on_main_reaches_another_worktree_and_an_unmerged_branchs_only_as_pending(
    worktrees: tuple[Scene, Claude], db: Database
) -> None:
    repos, claude = worktrees
    first = claude.run(DECISION)  # session 1, on main
    assert first.returncode == 0, first.stderr
    assert _summarise(db) == 1

    in_a = Claude(claude.home, repos.wt_a, claude.stand_in, claude.env)  # session 2, the feat/a worktree
    second = in_a.run("Which database do we use for the memory store?")
    assert second.returncode == 0, second.stderr
    block = _asked_block(in_a)
    assert "pgvector" in block.lower(), block  # the repository's memory, though another folder

    commit(repos.wt_b, "b.txt")
    in_b = Claude(claude.home, repos.wt_b, claude.stand_in, claude.env)  # session 3, on feat/b
    assert in_b.run(NAMING).returncode == 0
    assert _summarise(db) == 2  # sessions 2 and 3

    fourth = claude.run("What is the queue table called?")  # session 4, back on main
    assert fourth.returncode == 0, fourth.stderr
    block = _asked_block(claude)
    assert "pending on `feat/b`" in block and "job_inbox" not in block, block
    assert "pgvector" in block.lower(), block
