"""The remote hooks know the branch (issue 49): the sh/curl SessionStart hook sends ``repo``, ``branch`` and
``head`` read with git in the session's folder, and ``POST /v1/recall`` puts "pending on `feat/x`" in its
block as the MCP tool does (one function: jobs.claude_code.repo_recall).

Real git repositories, the hook script exactly as `episodes claude-code install --api` writes it, a real
`episodes api` over the real database; the branch states come from a local session start, as in production
(the service runs no git).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from support.api_server import serve
from support.claude_code_cli import DECISION, _hook
from support.git_repos import commit, git, scene
from support.repository_hooks import end_session, start_session

from jobs.claude_code import hook_settings
from jobs.cli import cli
from jobs.db import Database
from jobs.service.keys import create_key

QUESTION = "Which database do we use for the memory store?"
pytestmark = pytest.mark.skipif(not (shutil.which("sh") and shutil.which("curl")), reason="sh and curl are needed")


def _install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, api: str) -> str:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    args = ["claude-code", "install", "--user", "ann", "--api", api, "--key-env", "EPISODES_TEST_KEY", "--budget", "60"]
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == 0, done.output
    settings = json.loads((tmp_path / "home" / ".claude" / "settings.json").read_text())
    [command] = hook_settings.installed_commands(settings)["SessionStart"]
    return command


def _run(command: str, cwd: Path, key: str) -> str:
    """The installed SessionStart command run as Claude Code runs it: in the session's folder, the event on a
    socket as its stdin."""
    payload: dict[str, Any] = {
        "hook_event_name": "SessionStart",
        "source": "startup",
        "session_id": "s",
        "cwd": str(cwd),
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")} | {"EPISODES_TEST_KEY": key}
    ours, theirs = socket.socketpair()
    with ours, theirs:
        ours.sendall(json.dumps(payload).encode())
        ours.shutdown(socket.SHUT_WR)
        done = subprocess.run(
            command, shell=True, cwd=cwd, stdin=theirs.fileno(), capture_output=True, text=True, env=env, timeout=60
        )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.citus
def test_the_sh_hook_sends_the_branch_and_the_http_block_says_pending(
    tmp_path: Path, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    repos = scene(tmp_path)
    git(repos.main, "remote", "add", "origin", "https://ann:secret@github.com/acme/app.git")
    commit(repos.wt_a, "a.txt")
    end_session(db, "sess-a", repos.wt_a, DECISION, tmp_path)
    assert "pending on `feat/a`" in start_session(db, "start-1", repos.main)  # a local start records feat/a open
    outside = tmp_path / "plain"
    outside.mkdir()
    _, key = create_key(db, "acme", ["recall"], name="issue 49")
    with serve(db) as api:
        command = _install(tmp_path, monkeypatch, api)
        on_main = _run(command, repos.main, key)
        assert "pending on `feat/a`" in on_main and "pgvector" not in on_main.lower(), on_main
        on_a = _run(command, repos.wt_a, key)
        assert "pgvector" in on_a.lower() and "pending on" not in on_a, on_a  # in force on its own branch
        assert _run(command, outside, key) == ""  # outside git: no repository, nothing of app's
        # the Python hooks of remote mode (where sh/curl could not be installed) send them too, read from git's
        # files: at the start, and for the first prompt's recall (POST /v1/recall), feat/a's stays out on main
        start = {"hook_event_name": "SessionStart", "source": "startup", "session_id": "p-1", "cwd": str(repos.main)}
        shown, _ = _hook(start, "--user", "ann", "--api", api, "--budget", "60", env={"EPISODES_API_KEY": key})
        assert shown.returncode == 0 and "pending on `feat/a`" in shown.stdout, shown.stdout + shown.stderr
        prompt = {
            "hook_event_name": "UserPromptSubmit",
            "session_id": "p-1",
            "cwd": str(repos.main),
            "prompt": QUESTION,
        }
        said, _ = _hook(prompt, "--user", "ann", "--api", api, "--budget", "60", env={"EPISODES_API_KEY": key})
        assert said.returncode == 0 and "pgvector" not in said.stdout.lower(), said.stdout + said.stderr

        head = git(repos.main, "rev-parse", "HEAD")
        body = {"user_id": "ann", "message": QUESTION, "repo": "git@github.com:acme/app.git", "branch": "main"}
        answer = httpx.post(
            f"{api}/v1/recall", json={**body, "head": head}, headers={"Authorization": f"Bearer {key}"}, timeout=60
        )
    assert answer.status_code == 200, answer.text
    block = answer.json()["block"]
    assert "pending on `feat/a`" in block and "pgvector" not in block.lower(), block
