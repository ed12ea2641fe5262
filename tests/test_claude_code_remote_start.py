"""The remote SessionStart hook without Python: `episodes claude-code install --api` writes a command of
sh and curl (jobs/claude_code/session_start.sh) that hands the hook's JSON to
``POST /v1/claude-code/session-start`` (jobs/service/routes/claude_code.py) and prints the block.

Run here exactly as installed, with the event on stdin as Claude Code passes it, against a real
`episodes api` over a real database. Fail open: no key, a refused key, the service down: it prints
nothing, exits 0, and says why in the hooks' log.
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
from support.claude_code_cli import CLAUDE, DECISION, MODEL_CACHE, Claude, _hook, _session_file, _stored, _summarise
from support.stream_anthropic import StreamAnthropic

from jobs.claude_code import hook_settings, session_state
from jobs.claude_code.places import log_file
from jobs.cli import cli
from jobs.db import Database
from jobs.service.keys import create_key

pytestmark = pytest.mark.skipif(
    not (shutil.which("sh") and shutil.which("curl")),
    reason="sh and curl are needed for the remote SessionStart hook (it falls back to Python without them)",
)


def _install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, api: str) -> str:
    """`episodes claude-code install --api` into a temporary HOME; the SessionStart command it wrote."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    result = CliRunner().invoke(
        cli,
        ["claude-code", "install", "--user", "ann", "--api", api, "--key-env", "EPISODES_TEST_KEY", "--budget", "20"],
    )
    assert result.exit_code == 0, result.output
    settings = json.loads((tmp_path / "home" / ".claude" / "settings.json").read_text())
    [command] = hook_settings.installed_commands(settings)["SessionStart"]
    assert "python" not in command and "session_start.sh" in command, command
    return command


def _run(command: str, payload: dict[str, Any], key: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "EPISODES_TEST_KEY"}
    if key is not None:
        env["EPISODES_TEST_KEY"] = key
    # Claude Code (Node) hands a hook its stdin as a socket, which cannot be opened again by name (/dev/fd/0)
    ours, theirs = socket.socketpair()
    with ours, theirs:
        ours.sendall(json.dumps(payload).encode())
        ours.shutdown(socket.SHUT_WR)
        return subprocess.run(
            command, shell=True, stdin=theirs.fileno(), capture_output=True, text=True, env=env, timeout=60
        )


def test_the_installed_sh_curl_hook_prints_the_block_of_this_project_and_fails_open(
    tmp_path: Path, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, secret = create_key(db, "acme", ["recall", "ingest"], name="claude code")
    project = str(tmp_path / "shop-api")
    file = _session_file(tmp_path / "projects" / "shop", "11111111-aaaa", project, DECISION)
    with serve(db) as api:
        end = {
            "hook_event_name": "SessionEnd",
            "reason": "other",
            "session_id": "11111111-aaaa",
            "cwd": project,
            "transcript_path": str(file),
        }
        assert (
            _hook(end, "--user", "ann", "--api", api, "--budget", "60", env={"EPISODES_API_KEY": secret})[0].returncode
            == 0
        )
        assert _summarise(db) == 1
        command = _install(tmp_path, monkeypatch, api)

        start = {
            "hook_event_name": "SessionStart",
            "source": "startup",
            "session_id": "22222222-bbbb",
            "cwd": project,
            "transcript_path": str(tmp_path / "none.jsonl"),
            "model": "claude-x",
        }
        shown = _run(command, start, secret)
        assert shown.returncode == 0 and shown.stdout.startswith("<previous_episodes"), shown.stdout + shown.stderr
        assert "pgvector" in shown.stdout.lower() and "clearly relates" not in shown.stdout
        assert "SessionStart: ok (remote, curl)" in log_file().read_text()
        other = _run(command, {**start, "cwd": str(tmp_path / "another-project")}, secret)
        assert other.returncode == 0 and "pgvector" not in other.stdout.lower()  # another project's stay out

        # The first prompt (the Python hook) leaves out what the start showed, though the start kept no state here.
        prompt = {**start, "hook_event_name": "UserPromptSubmit", "prompt": "Which database did we choose?"}
        again, _ = _hook(prompt, "--user", "ann", "--api", api, "--budget", "60", env={"EPISODES_API_KEY": secret})
        assert again.returncode == 0 and again.stdout == "", again.stdout
        assert session_state.load("22222222-bbbb").episodes, "the start view's ids were remembered"

        refused = _run(command, start, "ep_" + "x" * 43)
        assert refused.returncode == 0 and refused.stdout == ""
        assert "401" in log_file().read_text().splitlines()[-1]
        missing = _run(command, start, None)
        assert missing.returncode == 0 and missing.stdout == ""
        assert "no API key in $EPISODES_TEST_KEY" in log_file().read_text().splitlines()[-1]
    down = _run(command, start, secret)  # the service has stopped
    assert down.returncode == 0 and down.stdout == ""
    # curl failed to connect (exit 7), at once: not a timeout (28) at --connect-timeout or the budget
    assert "failed open: curl: (7)" in log_file().read_text().splitlines()[-1]


def test_the_route_answers_text_or_json_and_needs_the_recall_scope(db: Database) -> None:
    _, reader = create_key(db, "acme", ["recall"], name="reader")
    _, writer = create_key(db, "acme", ["ingest"], name="writer")
    with serve(db) as api, httpx.Client(base_url=api) as client:
        url = "/v1/claude-code/session-start"
        body = {"cwd": "/src/x", "session_id": "s", "hook_event_name": "SessionStart", "anything": [1]}
        empty = client.post(url, params={"user_id": "nobody"}, json=body, headers={"Authorization": f"Bearer {reader}"})
        assert empty.status_code == 200 and empty.text == ""
        assert empty.headers["content-type"].startswith("text/plain")
        as_json = client.post(
            url,
            params={"user_id": "nobody", "format": "json"},
            json=body,
            headers={"Authorization": f"Bearer {reader}"},
        )
        assert as_json.json() == {"block": "", "episodes": [], "open_items": []}
        assert (
            client.post(
                url, params={"user_id": "nobody"}, json=body, headers={"Authorization": f"Bearer {writer}"}
            ).status_code
            == 403
        )
        assert client.post(url, params={"user_id": "nobody"}, json=body).status_code == 401
        assert client.post(url, json=body, headers={"Authorization": f"Bearer {reader}"}).status_code == 422
        assert (
            client.post(
                url, params={"user_id": "a"}, json={"cwd": "x\x00"}, headers={"Authorization": f"Bearer {reader}"}
            ).status_code
            == 422
        )


def test_install_refuses_a_key_variable_the_shell_could_not_expand(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    result = CliRunner().invoke(
        cli, ["claude-code", "install", "--api", "http://127.0.0.1:9", "--key-env", "KEY; rm -rf ~"]
    )
    assert result.exit_code != 0 and "not an environment variable name" in result.output
    assert not (tmp_path / "home" / ".claude" / "settings.json").exists()


@pytest.mark.slow
@pytest.mark.skipif(
    CLAUDE is None,
    reason="the Claude Code CLI is not installed: `npm install @anthropic-ai/claude-code` or put `claude` on PATH",
)
def test_real_claude_code_in_remote_mode_session_2_sees_session_1s_decision(
    tmp_path: Path, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real CLI with hooks installed by `install --api`: SessionEnd hands session 1 over through the
    service; session 2's SessionStart (sh and curl) puts its episode into the request to the model."""
    _, secret = create_key(db, "acme", ["recall", "ingest"], name="claude code")
    project = tmp_path / "work" / "shop-api"
    project.mkdir(parents=True)
    with serve(db) as api, StreamAnthropic(reply="Noted: PostgreSQL with pgvector it is.") as stand_in:
        monkeypatch.setenv("EPISODES_CACHE_DIR", MODEL_CACHE)
        _install(tmp_path, monkeypatch, api)
        claude = Claude(
            tmp_path / "home",
            project,
            stand_in,
            {"EPISODES_TEST_KEY": secret, "EPISODES_HOME": os.environ["EPISODES_HOME"]},
        )
        first = claude.run(DECISION)
        assert first.returncode == 0, first.stderr
        assert [row["purpose"] for row in _stored(db)] != [], "SessionEnd handed session 1 over through the API"
        assert _summarise(db) == 1
        second = claude.run("Which database do we use for the memory store?")
        assert second.returncode == 0, second.stderr
    asked = stand_in.messages()[-1].text()
    start, end = asked.find("<previous_episodes"), asked.find("</previous_episodes>")
    assert 0 <= start < end and "pgvector" in asked[start:end].lower(), log_file().read_text()[-3000:]
    assert asked.count("<previous_episodes") == 1, "the first prompt did not repeat what the start injected"
    assert "SessionStart: ok (remote, curl)" in log_file().read_text()
