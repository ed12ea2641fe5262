"""`episodes claude-code uninstall` removes what install made (issue 46, finding 22): install's record
(install.json), the sync ledger, the hooks' session state and their log go with the last hooks of ours;
while another scope still holds our hooks, the record stays for them. Remote hooks carry no tenant (the
key's is used): `--tenant local` no longer appears in them, and an explicit --tenant with --api is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from jobs.claude_code import choices, hook_settings
from jobs.claude_code.places import home, log_file, state_dir
from jobs.cli import cli

API = ["--api", "http://127.0.0.1:9", "--key-env", "MY_KEY"]


@pytest.fixture
def user_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    return tmp_path / "user"


def _invoke(*args: str) -> str:
    result = CliRunner().invoke(cli, ["claude-code", *args])
    assert result.exit_code == 0, result.output
    return result.output


def _hooks_kept(session_id: str) -> list[Path]:
    """What the hooks and sync keep beside install's record, as they write it."""
    ledger = home() / "claude-code" / "synced.json"
    ledger.write_text(json.dumps({f"/p/{session_id}.jsonl": [1, 2]}))
    state = state_dir() / f"{session_id}.json"
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_text("{}")
    log_file().parent.mkdir(parents=True, exist_ok=True)
    log_file().write_text("SessionStart: ok\n")
    return [choices.path(), ledger, state, log_file()]


def test_uninstall_removes_install_json_the_ledger_the_state_and_the_log(user_home: Path) -> None:
    _invoke("install", "--user", "ann", *API)
    kept = _hooks_kept("s-1")
    assert all(p.exists() for p in kept)

    said = _invoke("uninstall")
    assert "Removed 4 hooks" in said and "Removed what the integration kept" in said, said
    assert [p for p in kept if p.exists()] == []
    assert not (home() / "claude-code").exists()
    assert "stay" in said and "episodes forget" in said  # the memory in the database is not the integration's
    assert "nothing changed" in _invoke("uninstall")


def test_uninstall_of_one_scope_keeps_the_record_while_another_holds_our_hooks(user_home: Path, tmp_path: Path) -> None:
    project = tmp_path / "shop-api"
    project.mkdir()
    _invoke("install", "--user", "ann", *API)
    _invoke("install", "--user", "ann", *API, "--scope", "project", "--project-dir", str(project))
    kept = _hooks_kept("s-2")
    assert set(choices.load().places) == {  # type: ignore[union-attr]
        str(user_home / ".claude" / "settings.json"),
        str(project / ".claude" / "settings.local.json"),
    }

    said = _invoke("uninstall", "--scope", "project", "--project-dir", str(project))
    assert "Kept" in said and all(p.exists() for p in kept), said
    assert choices.load().places == (str(user_home / ".claude" / "settings.json"),)  # type: ignore[union-attr]

    _invoke("uninstall")
    assert [p for p in kept if p.exists()] == []


def test_remote_hooks_name_no_tenant_and_an_explicit_tenant_is_refused(user_home: Path) -> None:
    _invoke("install", "--user", "ann", *API)
    settings = json.loads((user_home / ".claude" / "settings.json").read_text())
    commands = [c for cs in hook_settings.installed_commands(settings).values() for c in cs]
    assert len(commands) == 4 and not any("--tenant" in c for c in commands), commands
    assert choices.load().tenant is None  # type: ignore[union-attr]

    refused = CliRunner().invoke(cli, ["claude-code", "install", "--user", "ann", "--tenant", "acme", *API])
    assert refused.exit_code == 2 and "--tenant is local mode's" in refused.output, refused.output
    # a local install still names its tenant
    local = hook_settings.hook_command(tenant="acme", user="ann")
    assert "--tenant acme --user ann" in local
