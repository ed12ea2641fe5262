"""The installed hook command imports nothing from the project it runs in, fails open when even our own
import fails, and keeps its log and state owner-only (issue 35, items 2 and 7).

Claude Code runs a hook in the project's folder. ``python -m jobs.claude_code.hook`` put that folder
first on ``sys.path``: a repository holding a ``jobs/`` package ran its own code with the hook's input
and environment, and an ordinary project with a ``jobs/`` folder made the hook exit 1. These tests run
the command exactly as `episodes claude-code install` writes it, through a shell, from such folders.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.claude_code_cli import DECISION, MODEL_CACHE, _hostile_project, _session_file

from jobs.claude_code import hook_settings
from jobs.claude_code.places import log_file, state_dir
from jobs.cli import cli
from jobs.db import Database


def _run(
    command: str, payload: Mapping[str, object], cwd: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """The installed command as Claude Code runs it: through a shell, in the project's folder, the event on stdin."""
    return subprocess.run(
        ["sh", "-c", command], cwd=cwd, input=json.dumps(payload), env=env, capture_output=True, text=True, timeout=300
    )


def _log() -> str:
    return log_file().read_text() if log_file().exists() else "(no log)"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_installed_hook_runs_none_of_a_projects_jobs_package_and_works_beside_an_ordinary_one(
    tmp_path: Path, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    # An install of an older version: upgraded in place, its commands replaced by the launcher.
    old = {
        "hooks": {
            "SessionEnd": [
                {
                    "hooks": [
                        {
                            "type": "command",
                            "timeout": 30,
                            "command": "/usr/bin/python3 -m jobs.claude_code.hook --user ann",
                        }
                    ]
                }
            ]
        }
    }
    settings.write_text(json.dumps(old))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.setenv("EPISODES_CACHE_DIR", MODEL_CACHE)
    installed = CliRunner().invoke(
        cli, ["claude-code", "install", "--tenant", "acme", "--user", "ann", "--budget", "60"]
    )
    assert installed.exit_code == 0, installed.output
    commands = hook_settings.installed_commands(json.loads(settings.read_text()))
    assert all(len(c) == 1 and "launch.py" in c[0] and " -I " in c[0] for c in commands.values()), commands
    assert "-m jobs.claude_code.hook" not in settings.read_text()

    marker = tmp_path / "hostile-code-ran"
    hostile = _hostile_project(tmp_path / "evil-repo", marker)
    ordinary = tmp_path / "ordinary-repo"
    (ordinary / "jobs").mkdir(parents=True)
    (ordinary / "jobs" / "__init__.py").write_text("")  # a project's own, unrelated jobs/ package
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "DATABASE_URL": db.url,
        "PYTHONPATH": str(hostile),
    }  # a project's .envrc may set it too: isolated mode ignores it

    for n, project in enumerate((hostile, ordinary)):
        sid = f"7777777{n}-aaaa"
        file = _session_file(tmp_path / "projects" / project.name, sid, str(project), DECISION)
        end = {
            "hook_event_name": "SessionEnd",
            "reason": "other",
            "session_id": sid,
            "cwd": str(project),
            "transcript_path": str(file),
        }
        done = _run(commands["SessionEnd"][0], end, project, env)
        assert (done.returncode, done.stdout, done.stderr) == (0, "", ""), (done, _log())
        start = {
            "hook_event_name": "SessionStart",
            "source": "startup",
            "session_id": f"8888888{n}-bbbb",
            "cwd": str(project),
            "transcript_path": str(tmp_path / "none.jsonl"),
        }
        shown = _run(commands["SessionStart"][0], start, project, env)
        assert shown.returncode == 0, shown.stderr
        assert "HOSTILE" not in shown.stdout + shown.stderr
        # The normal output: this project's session, handed over a moment ago, waiting for summarize.
        assert shown.stdout.startswith("<previous_episodes") and "pgvector" in shown.stdout.lower(), (
            shown.stdout,
            _log(),
        )
        assert not marker.exists(), "the project's jobs package ran inside our hook"
    with db.tenant("acme") as conn:
        stored = conn.execute("SELECT session_id FROM transcripts ORDER BY session_id").fetchall()
    assert [r["session_id"] for r in stored] == ["77777770-aaaa", "77777771-aaaa"]

    # Item 7: what the hooks keep says which projects a user works on, and when: owner-only.
    assert _mode(log_file()) == 0o600 and _mode(log_file().parent) == 0o700
    assert _mode(state_dir() / "88888880-bbbb.json") == 0o600 and _mode(state_dir()) == 0o700


@pytest.mark.slow
def test_install_run_from_a_project_holding_a_jobs_package_runs_none_of_it(tmp_path: Path, db: Database) -> None:
    """`episodes claude-code install` is run in the project's folder too (``--scope project`` asks for it): the
    command itself, and every Python it starts (compiling the hook's modules), import nothing from there."""
    marker = tmp_path / "hostile-code-ran"
    project = _hostile_project(tmp_path / "evil-repo", marker)
    home = tmp_path / "home"
    episodes = shutil.which("episodes", path=os.path.dirname(sys.executable))
    assert episodes, "the episodes console script is installed beside this Python"
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "DATABASE_URL": db.url,
        "EPISODES_HOME": str(home / "ep"),
        "EPISODES_CACHE_DIR": MODEL_CACHE,
    }
    done = subprocess.run(
        [episodes, "claude-code", "install", "--scope", "project", "--tenant", "acme", "--user", "ann"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert "HOSTILE" not in done.stdout + done.stderr
    assert not marker.exists(), "the project's jobs package ran during install"
    assert (project / ".claude" / "settings.local.json").exists()


def test_the_launcher_fails_open_when_our_own_package_cannot_be_imported(tmp_path: Path) -> None:
    """A broken or half-upgraded install: nothing printed, exit 0, one line in the hooks' log."""
    broken = tmp_path / "site" / "jobs" / "claude_code"
    broken.mkdir(parents=True)
    shutil.copy(hook_settings.LAUNCHER, broken / "launch.py")
    (broken.parent / "__init__.py").write_text("raise ImportError('half-upgraded install')\n")
    (broken / "__init__.py").write_text("")
    episodes_home = tmp_path / "episodes-home"
    command = hook_settings.hook_command(tenant="acme", user="ann", env={"EPISODES_HOME": str(episodes_home)})
    command = command.replace(str(hook_settings.LAUNCHER), str(broken / "launch.py"))
    done = _run(
        command,
        {"hook_event_name": "SessionStart", "session_id": "s1", "cwd": str(tmp_path)},
        tmp_path,
        {"PATH": os.environ["PATH"], "HOME": str(tmp_path)},
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    log = episodes_home / "logs" / "claude-code-hooks.log"
    assert "failed open before the hook ran" in log.read_text() and "half-upgraded install" in log.read_text()
    assert _mode(log) == 0o600
