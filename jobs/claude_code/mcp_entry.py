"""`episodes mcp` in Claude Code's configuration, registered by `episodes claude-code install --mcp`.

An MCP client starts its servers in its own environment, and Claude Desktop's (or that of a Claude Code
started from a desktop launcher) has no EPISODES_HOME: `episodes mcp` would look in the default folder,
not in the one the hooks use. So the entry carries what the hooks carry (the EPISODES_HOME the install
ran with, and the other non-secret settings of jobs.claude_code.hook_settings.CARRIED_ENV) in its ``env``;
DATABASE_URL, which may hold a password, stays in the environment Claude Code runs in, as for the hooks.

Written through Claude Code's own CLI (``claude mcp add-json``; ``claude mcp remove`` on uninstall), which
owns the file it lives in (~/.claude.json): ``--scope user`` for every project, or its ``local`` scope for
one project (this person's, never the committed .mcp.json: the entry names this machine's paths). The
command is this Python in isolated mode (``-I``), so a project's own ``jobs/`` folder is never imported.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from jobs import config
from jobs.claude_code.hook_settings import CARRIED_ENV, CARRIED_PATHS
from jobs.errors import ConfigError

NAME = "episodes"
USER = "user"  # the registration of every project; otherwise a project's folder
_TIMEOUT = 60.0


def claude() -> str:
    """The Claude Code CLI that registers the server, or :class:`ConfigError` saying what to do."""
    found = shutil.which("claude")
    if found is None:
        raise ConfigError(
            "--mcp registers the MCP server through Claude Code's CLI, and `claude` is not on PATH; "
            "install Claude Code, or leave out --mcp and add the server by hand (docs/claude-code.md)."
        )
    return found


def entry(tenant: str, user: str) -> dict[str, Any]:
    """The server's entry: this Python running `episodes mcp` for ``tenant``/``user``, with the carried settings."""
    env: dict[str, str] = {}
    for name in CARRIED_ENV:
        value = config.env(name)
        if value:
            env[name] = os.path.abspath(os.path.expanduser(value)) if name in CARRIED_PATHS else value
    if "EPISODES_HOME" not in env:  # the default folder, named: the client's may differ (another HOME)
        from jobs.claude_code.places import home

        env["EPISODES_HOME"] = str(home().expanduser().absolute())
    args = ["-I", "-m", "jobs.cli", "mcp", "--tenant", tenant, "--user", user]
    return {"type": "stdio", "command": sys.executable, "args": args, "env": env}


def _scope(where: str) -> tuple[list[str], Path | None]:
    return (["--scope", "user"], None) if where == USER else (["--scope", "local"], Path(where))


def _run(args: list[str], cwd: Path | None) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [claude(), "mcp", *args], cwd=cwd, capture_output=True, text=True, timeout=_TIMEOUT, check=False
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise ConfigError(f"`claude mcp {args[0]}` could not run: {exc}") from None


def register(where: str, tenant: str, user: str) -> dict[str, Any]:
    """Register the server for ``where`` (:data:`USER` or a project's folder), replacing an entry of that
    name there; the entry written."""
    scope, cwd = _scope(where)
    _run(["remove", *scope, NAME], cwd)  # none there is fine: add-json refuses a name already taken
    written = entry(tenant, user)
    done = _run(["add-json", *scope, NAME, json.dumps(written)], cwd)
    if done.returncode != 0:
        said = " ".join((done.stderr or done.stdout).split())[:300]
        raise ConfigError(f"`claude mcp add-json` failed ({said}); the hooks are installed, the MCP server is not.")
    return written


def unregister(where: str) -> bool:
    """Remove the server registered for ``where``; whether there was one (and `claude` could remove it)."""
    if shutil.which("claude") is None:
        return False
    scope, cwd = _scope(where)
    if cwd is not None and not cwd.is_dir():
        return False
    return _run(["remove", *scope, NAME], cwd).returncode == 0
