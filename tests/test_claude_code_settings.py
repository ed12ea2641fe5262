"""Claude Code integration: settings.json merged beside other hooks and removed exactly, the project's purpose,
and what the first prompt adds to the session-start block."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from jobs.claude_code import hook_settings, session_state
from jobs.claude_code.places import project_purpose
from jobs.cli import cli

# --- settings.json -------------------------------------------------------------------------------

USER_SETTINGS: dict[str, Any] = {
    "model": "opus",
    "permissions": {"allow": ["Bash(ls:*)"]},
    "hooks": {
        "SessionStart": [{"matcher": "startup", "hooks": [{"type": "command", "command": "echo mine"}]}],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./check.sh", "timeout": 3}]}],
    },
}


def test_install_merges_beside_other_hooks_is_idempotent_and_uninstall_removes_exactly_ours(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    path = tmp_path / "home" / ".claude" / "settings.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(USER_SETTINGS))
    runner = CliRunner()
    args = ["claude-code", "install", "--user", "ann", "--api", "http://127.0.0.1:9", "--key-env", "MY_KEY"]

    first = runner.invoke(cli, args)
    assert first.exit_code == 0, first.output
    installed = json.loads(path.read_text())
    ours = hook_settings.installed_commands(installed)
    assert sorted(ours) == ["PreCompact", "SessionEnd", "SessionStart", "UserPromptSubmit"]
    assert all(
        len(commands) == 1 and "--user ann" in commands[0] and "--key-env MY_KEY" in commands[0]
        for event, commands in ours.items()
        if event != "SessionStart"
    )
    # The remote session start runs no Python: sh and curl (tests/test_claude_code_remote_start.py).
    assert "session_start.sh" in ours["SessionStart"][0] and "user_id=ann" in ours["SessionStart"][0]
    assert " MY_KEY " in ours["SessionStart"][0]
    # The user's hooks and settings are untouched, theirs first.
    assert installed["hooks"]["SessionStart"][0] == USER_SETTINGS["hooks"]["SessionStart"][0]
    assert installed["hooks"]["PreToolUse"] == USER_SETTINGS["hooks"]["PreToolUse"]
    assert installed["model"] == "opus" and installed["permissions"] == USER_SETTINGS["permissions"]
    assert installed["hooks"]["SessionStart"][1]["matcher"] == "startup|resume|clear|compact"

    again = runner.invoke(cli, args)
    assert again.exit_code == 0 and "nothing changed" in again.output
    assert json.loads(path.read_text()) == installed

    other_user = runner.invoke(cli, [*args[:3], "bob", *args[4:]])  # options changed: ours replaced, not added
    assert other_user.exit_code == 0, other_user.output
    replaced = hook_settings.installed_commands(json.loads(path.read_text()))
    assert all(len(c) == 1 and ("--user bob" in c[0] or "user_id=bob" in c[0]) for c in replaced.values())

    removed = runner.invoke(cli, ["claude-code", "uninstall"])
    assert removed.exit_code == 0 and "Removed 4 hooks" in removed.output
    assert json.loads(path.read_text()) == USER_SETTINGS
    assert "nothing changed" in runner.invoke(cli, ["claude-code", "uninstall"]).output


def test_install_refuses_a_settings_file_it_cannot_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    path = tmp_path / "home" / ".claude" / "settings.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"hooks": {')
    result = CliRunner().invoke(cli, ["claude-code", "install", "--api", "http://127.0.0.1:9"])
    assert result.exit_code == 1 and "not valid JSON" in result.output
    assert path.read_text() == '{"hooks": {'


def test_project_purpose_is_a_valid_purpose_and_tells_projects_apart() -> None:
    from jobs.recall.purposes import purpose_filter

    a, b = project_purpose("/home/ann/Code/My Project"), project_purpose("/srv/My Project")
    assert a.startswith("cc-my-project-") and b.startswith("cc-my-project-") and a != b
    assert purpose_filter(a) == sorted([a, "general"])  # recall: this project and the user's general episodes
    assert project_purpose("/").startswith("cc-root-")


def _episode(id: int, *, relevant: bool) -> Any:
    import datetime as dt

    from jobs.recall.result import RecalledEpisode

    when = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
    return RecalledEpisode(
        id,
        "session",
        f"s{id}",
        "general",
        f"summary {id}",
        [],
        0.5,
        when,
        when,
        None,
        None,
        0.1,
        0.2,
        None,
        1 if relevant else None,
        None,
        id,
        1 if relevant else None,
        ["relevant" if relevant else "recent"],
    )


def test_the_first_prompt_adds_only_relevant_episodes_and_open_items_not_injected_at_start() -> None:
    import datetime as dt

    from jobs.claude_code import injection
    from jobs.recall.result import RecalledOpenItem

    when = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
    state = session_state.SessionState()
    session_state.remember_start(state, [1], [10])
    items = [
        RecalledOpenItem(10, 1, "commitment", "old item", None, None, when),
        RecalledOpenItem(11, 2, "open_question", "new item", None, None, when),
    ]
    block = injection.prompt_block(
        state, when, [_episode(1, relevant=True), _episode(2, relevant=True), _episode(3, relevant=False)], items
    )
    assert "summary 2" in block and "new item" in block
    assert "summary 1" not in block and "summary 3" not in block and "old item" not in block
    assert state.episodes == [1, 2] and state.open_items == [10, 11]
    assert injection.prompt_block(state, when, [_episode(1, relevant=True), _episode(2, relevant=True)], items) == ""
