"""Claude Code set-up remembers (issue 35, item 11; item 7's warning about a key sent in clear).

`episodes claude-code install --tenant T --user U` records its choices; `claude-code sync` and
`serve --claude-code-sync` without options store under T / U (they used ``local`` and the login name,
storing the sessions the hooks had stored a second time under another tenant). `install --scope
project` writes this machine's paths and user only to .claude/settings.local.json, never to the
project's shared .claude/settings.json.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.claude_code_cli import DECISION, MODEL_CACHE, Claude, _hostile_project, _old_session, needs_claude
from support.databases import service_url
from support.stream_anthropic import StreamAnthropic
from support.waiting import wait_until

from jobs.claude_code import hook_settings
from jobs.cli import cli
from jobs.db import Database


def _rows(db: Database, tenant: str) -> list[tuple[str, str]]:
    with db.tenant(tenant) as conn:
        rows = conn.execute("SELECT user_id, session_id FROM transcripts ORDER BY session_id").fetchall()
    return [(r["user_id"], r["session_id"]) for r in rows]


@pytest.fixture
def installed(tmp_path: Path, db: Database, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`episodes claude-code install --tenant acme --user ann` (local mode) under a temporary HOME."""
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.setenv("EPISODES_CACHE_DIR", MODEL_CACHE)
    result = CliRunner().invoke(cli, ["claude-code", "install", "--tenant", "acme", "--user", "ann"])
    assert result.exit_code == 0, result.output
    assert "claude-code sync` and `serve --claude-code-sync` use these choices" in result.output
    return home


def test_sync_without_options_stores_as_install_was_told_and_options_still_win(installed: Path, db: Database) -> None:
    _old_session(installed, "aaaa-1111", "/work/shop")
    synced = CliRunner().invoke(cli, ["claude-code", "sync"])
    assert synced.exit_code == 0, synced.output
    assert "Storing as user ann, tenant acme (as installed:" in synced.output
    assert _rows(db, "acme") == [("ann", "aaaa-1111")]
    assert _rows(db, "local") == []

    _old_session(installed, "bbbb-2222", "/work/shop")
    explicit = CliRunner().invoke(cli, ["claude-code", "sync", "--tenant", "globex", "--user", "bob"])
    assert explicit.exit_code == 0, explicit.output
    assert "Storing as user bob, tenant globex." in explicit.output
    assert _rows(db, "globex") == [("bob", "bbbb-2222")]

    ledger = Path(os.environ["EPISODES_HOME"]) / "claude-code" / "synced.json"
    record = ledger.with_name("install.json")
    kept = json.loads(record.read_text())
    assert {k: kept[k] for k in ("tenant", "user", "api", "key_env")} == {
        "tenant": "acme",
        "user": "ann",
        "api": None,
        "key_env": None,
    }
    for private in (ledger, record):  # item 7: owner-only
        assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert stat.S_IMODE(ledger.parent.stat().st_mode) == 0o700


@pytest.mark.slow  # `episodes serve` in a process of its own
def test_serve_claude_code_sync_without_options_stores_as_install_was_told(installed: Path, db: Database) -> None:
    _old_session(installed, "cccc-3333", "/work/shop")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env.update(DATABASE_URL=db.url, EPISODES_SERVICE_DATABASE_URL=service_url(db.url), HF_HUB_OFFLINE="1")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jobs.cli",
            "serve",
            "--claude-code-sync",
            "--extractor",
            "offline",
            "--concurrency",
            "1",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def stored() -> list[tuple[str, str]]:
            assert proc.poll() is None, proc.communicate()
            return _rows(db, "acme")

        assert wait_until(stored, 180, "serve's Claude Code sync") == [("ann", "cccc-3333")]
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=60)
    assert "Claude Code sync: Storing as user ann, tenant acme (as installed:" in out
    assert _rows(db, "local") == []


def test_project_scope_keeps_this_machines_paths_and_user_out_of_the_shared_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    project = tmp_path / "shop"
    shared = project / ".claude" / "settings.json"
    shared.parent.mkdir(parents=True)
    theirs = {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./check.sh"}]}]}}
    older = hook_settings.with_ours(theirs, "/home/ann/venv/bin/python -m jobs.claude_code.hook --user ann")
    shared.write_text(json.dumps(older))  # an older install wrote ours into the shared file
    runner = CliRunner()
    args = [
        "claude-code",
        "install",
        "--scope",
        "project",
        "--project-dir",
        str(project),
        "--user",
        "ann",
        "--api",
        "https://memory.example.com",
    ]
    result = runner.invoke(cli, args)
    assert result.exit_code == 0, result.output

    assert json.loads(shared.read_text()) == theirs  # the team's file: their hooks, nothing of this machine
    text = shared.read_text()
    assert sys.executable not in text and os.environ["EPISODES_HOME"] not in text and "ann" not in text
    local = project / ".claude" / "settings.local.json"
    ours = hook_settings.installed_commands(json.loads(local.read_text()))
    assert sorted(ours) == ["PreCompact", "SessionEnd", "SessionStart", "UserPromptSubmit"]
    assert all("ann" in commands[0] for commands in ours.values())

    removed = runner.invoke(cli, ["claude-code", "uninstall", "--scope", "project", "--project-dir", str(project)])
    assert removed.exit_code == 0 and "Removed 4 hooks" in removed.output, removed.output
    assert hook_settings.installed_commands(json.loads(local.read_text())) == {}
    assert json.loads(shared.read_text()) == theirs

    shared.write_text(json.dumps(older))  # uninstall takes an older install's hooks out of the shared file too
    again = runner.invoke(cli, ["claude-code", "uninstall", "--scope", "project", "--project-dir", str(project)])
    assert again.exit_code == 0 and json.loads(shared.read_text()) == theirs, again.output


@pytest.mark.parametrize(
    ("api", "warned"),
    [
        ("http://memory.example.com:8000", True),
        ("http://10.0.0.7", True),
        ("http://127.0.0.1:8000", False),
        ("http://localhost:8000", False),
        ("http://[::1]:8000", False),
        ("https://memory.example.com", False),
    ],
)
def test_install_warns_when_the_key_would_cross_the_network_in_clear(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, api: str, warned: bool
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    result = CliRunner().invoke(cli, ["claude-code", "install", "--user", "ann", "--api", api])
    assert result.exit_code == 0, result.output
    assert ("unencrypted" in result.output) is warned, result.output


def test_a_session_start_hook_log_created_by_install_is_owner_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    result = CliRunner().invoke(cli, ["claude-code", "install", "--user", "ann", "--api", "http://127.0.0.1:9"])
    assert result.exit_code == 0, result.output
    from jobs.claude_code.places import log_file

    assert stat.S_IMODE(log_file().stat().st_mode) == 0o600 and stat.S_IMODE(log_file().parent.stat().st_mode) == 0o700


@needs_claude
@pytest.mark.slow
def test_real_claude_code_runs_the_hooks_of_settings_local_json_and_none_of_the_projects_code(
    tmp_path: Path, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real CLI in a project holding a hostile jobs/ package, hooks installed with --scope project."""
    home, project = tmp_path / "cc-home", tmp_path / "work" / "shop-api"
    (home / ".claude").mkdir(parents=True)
    marker = tmp_path / "hostile-code-ran"
    _hostile_project(project, marker)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.setenv("EPISODES_CACHE_DIR", MODEL_CACHE)
    result = CliRunner().invoke(
        cli,
        [
            "claude-code",
            "install",
            "--scope",
            "project",
            "--project-dir",
            str(project),
            "--tenant",
            "acme",
            "--user",
            "ann",
            "--budget",
            "60",
        ],
    )
    assert result.exit_code == 0, result.output
    assert not (project / ".claude" / "settings.json").exists()
    env = {"DATABASE_URL": db.url, "EPISODES_CACHE_DIR": MODEL_CACHE, "EPISODES_HOME": os.environ["EPISODES_HOME"]}
    with StreamAnthropic(reply="Noted: PostgreSQL with pgvector it is.") as stand_in:
        claude = Claude(home, project, stand_in, env)
        first = claude.run(DECISION)
        assert first.returncode == 0, first.stderr
        second = claude.run("Which database did we choose?")
        assert second.returncode == 0, second.stderr
        asked = [request.text() for request in stand_in.messages()]
    assert [user for user, _ in _rows(db, "acme")] == ["ann", "ann"]  # each SessionEnd hook handed its session over
    assert "<previous_episodes" in asked[-1] and "pgvector" in asked[-1].lower()  # session 2's SessionStart hook
    assert not marker.exists() and not any("HOSTILE" in text for text in asked)


def test_after_a_remote_install_sync_stores_through_the_api_and_serve_asks_for_a_tenant(
    tmp_path: Path, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    from support.api_server import serve

    from jobs.claude_code.choices import serve_identity
    from jobs.errors import ConfigError
    from jobs.service.keys import create_key

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    _, secret = create_key(db, "acme", ["recall", "ingest"], name="claude code")
    monkeypatch.setenv("MY_KEY", secret)
    _old_session(tmp_path, "dddd-4444", "/work/shop")
    with serve(db) as api:
        runner = CliRunner()
        installed = runner.invoke(cli, ["claude-code", "install", "--user", "ann", "--api", api, "--key-env", "MY_KEY"])
        assert installed.exit_code == 0, installed.output
        synced = runner.invoke(cli, ["claude-code", "sync"])
    assert synced.exit_code == 0, synced.output
    assert f"Storing as user ann, remote ({api}, key from $MY_KEY) (as installed:" in synced.output
    assert _rows(db, "acme") == [("ann", "dddd-4444")]
    with pytest.raises(ConfigError, match="remote mode"):  # serve writes to its own database: which tenant?
        serve_identity(None, None, print)
    assert serve_identity("acme", None, lambda line: None) == ("acme", "ann")
