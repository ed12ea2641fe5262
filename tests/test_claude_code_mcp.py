"""`episodes mcp` finds the hooks' database (issue 46, finding 18).

An MCP client starts its server in its own environment; Claude Desktop's has no EPISODES_HOME and no
DATABASE_URL. `episodes mcp` used to create a second, empty embedded database in the default folder and
fail ~10 s later ("role episodes_service does not exist"). Now it refuses at once, in one line saying what
to set, and creates nothing; and `episodes claude-code install --mcp` registers the server with Claude Code
carrying the EPISODES_HOME the hooks use, so the real `claude` CLI, started with nothing but PATH and
HOME, connects to it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.claude_code_cli import CLAUDE, MODEL_CACHE, needs_claude
from support.waiting import wait_until


def _bare_env(user_home: Path) -> dict[str, str]:
    """What a desktop MCP client gives its servers: PATH and HOME, no EPISODES_* and no DATABASE_URL."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(user_home)}


def test_mcp_in_a_clean_environment_refuses_in_one_line_and_creates_no_database(tmp_path: Path) -> None:
    user_home = tmp_path / "desktop-user"
    user_home.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "jobs.cli", "mcp", "--tenant", "acme", "--user", "ann"],
        env=_bare_env(user_home),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    default = user_home / ".local" / "share" / "episodes"
    assert done.returncode == 1, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"episodes: no episodes database in {default / 'pgdata'}"), line
    assert "EPISODES_HOME" in line and "DATABASE_URL" in line and "claude-code install --mcp" in line, line
    assert not (default / "pgdata").exists()


def _stop_embedded(pgdata: Path) -> None:
    """Stop the embedded server a subprocess left running in ``pgdata`` (fast shutdown), and wait for it."""
    pid_file = pgdata / "postmaster.pid"
    if not pid_file.is_file():
        return
    pid = int(pid_file.read_text().split()[0])
    try:
        os.kill(pid, signal.SIGINT)
    except ProcessLookupError:
        return

    def gone() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False

    wait_until(gone, 60, f"the embedded PostgreSQL in {pgdata} to stop")


@pytest.fixture
def embedded_home(tmp_path: Path) -> Iterator[Path]:
    """An EPISODES_HOME with an initialised embedded database, as `episodes init` leaves it; stopped after."""
    base = tmp_path / "episodes-home"
    try:
        yield base
    finally:
        _stop_embedded(base / "pgdata")


@needs_claude
@pytest.mark.slow
def test_install_mcp_registers_the_server_with_the_hooks_home_and_a_bare_client_connects(
    tmp_path: Path, embedded_home: Path
) -> None:
    user_home = tmp_path / "user"
    user_home.mkdir()
    env = {**_bare_env(user_home), "EPISODES_HOME": str(embedded_home), "EPISODES_CACHE_DIR": MODEL_CACHE}

    def episodes(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "jobs.cli", *args], env=env, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done

    episodes("init")
    said = episodes("claude-code", "install", "--tenant", "acme", "--user", "ann", "--mcp").stdout
    assert f"Registered the MCP server 'episodes' with Claude Code (user scope), EPISODES_HOME={embedded_home}" in said

    entry = json.loads((user_home / ".claude.json").read_text())["mcpServers"]["episodes"]
    assert entry["env"]["EPISODES_HOME"] == str(embedded_home), entry
    assert entry["args"] == ["-I", "-m", "jobs.cli", "mcp", "--tenant", "acme", "--user", "ann"], entry
    assert "DATABASE_URL" not in entry["env"]

    assert CLAUDE is not None
    checked = subprocess.run(  # the client starts the server and speaks MCP to it, from a bare environment
        [CLAUDE, "mcp", "get", "episodes"],
        env=_bare_env(user_home),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert "Connected" in checked.stdout and "Failed" not in checked.stdout, checked.stdout + checked.stderr
    assert not (user_home / ".local" / "share" / "episodes").exists()  # no second database

    removed = episodes("claude-code", "uninstall").stdout
    assert "Removed the MCP server 'episodes'" in removed, removed
    assert "episodes" not in json.loads((user_home / ".claude.json").read_text()).get("mcpServers", {})
    assert not (embedded_home / "claude-code" / "install.json").exists()
