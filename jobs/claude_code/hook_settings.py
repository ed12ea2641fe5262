"""Our hooks in Claude Code's settings.json: merged in beside the user's own, and taken out exactly.

Claude Code reads ``{"hooks": {EVENT: [{"matcher": ..., "hooks": [{"type": "command", "command":
..., "timeout": seconds}]}]}}`` from ~/.claude/settings.json (user scope) and, in a project, from
.claude/settings.json (shared, committed) and .claude/settings.local.json (this person's, not
committed). Our commands name this machine's Python, its EPISODES_HOME and the user, so the project
scope writes them to settings.local.json only. Ours are the command hooks whose command runs
``jobs/claude_code/launch.py`` (``-m jobs.claude_code.hook`` in older installs, recognised so an
upgrade replaces them; or, for the remote SessionStart hook, ``jobs/claude_code/session_start.sh``);
installing removes those first and adds the current ones (so installing twice changes nothing and
installing with other options replaces them), and uninstalling removes only them, with any matcher
group or event they leave empty. Every other key and hook is kept as it was, in its order.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from jobs import config
from jobs.errors import ConfigError

MARKER = "-m jobs.claude_code.hook"  # the command of installs before the launcher (imported from the project's folder)
LAUNCHER = Path(__file__).with_name("launch.py")
LAUNCH_MARKER = "claude_code/launch.py"
# The remote SessionStart hook: sh and curl, no Python (jobs/claude_code/session_start.sh).
SESSION_START_SCRIPT = Path(__file__).with_name("session_start.sh")
SCRIPT_MARKER = "claude_code/session_start.sh"
START_ROUTE = "/v1/claude-code/session-start"  # jobs/service/routes/claude_code.py; the Python hook calls it too
_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class HookEvent:
    name: str
    matcher: str | None  # None: the event takes no matcher
    timeout: int  # seconds Claude Code waits (the hook's own budget is shorter, jobs.claude_code.hook)


EVENTS: tuple[HookEvent, ...] = (
    HookEvent("SessionStart", "startup|resume|clear|compact", 10),
    HookEvent("UserPromptSubmit", None, 10),
    HookEvent("PreCompact", "manual|auto", 30),
    HookEvent("SessionEnd", None, 30),
)

# Settings the hook needs to find the same data as the CLI that installed it, and that are no secret
# (DATABASE_URL may hold a password: it stays in the environment Claude Code runs in).
CARRIED_ENV = ("EPISODES_HOME", "EPISODES_CACHE_DIR", "EPISODES_MODEL_DIR", "EPISODES_EMBEDDER")
# Those that name folders: carried as absolute paths (the hook runs in the project's folder, then in /).
CARRIED_PATHS = ("EPISODES_HOME", "EPISODES_CACHE_DIR", "EPISODES_MODEL_DIR")


def hook_command(
    *,
    tenant: str | None,
    user: str,
    api: str | None = None,
    key_env: str | None = None,
    python: str | None = None,
    env: Mapping[str, str] | None = None,
    budget: float | None = None,
) -> str:
    """The shell command of every one of our hooks (the event comes on stdin): the launcher by its absolute
    path in isolated mode (``-I``), so nothing of the project's folder is imported (jobs.claude_code.launch).
    A remote hook (``api``) names no tenant: the service takes the key's."""
    parts = [python or sys.executable, "-I", str(LAUNCHER)]
    parts += ["--user", user] if api or tenant is None else ["--tenant", tenant, "--user", user]
    if api:
        parts += ["--api", api, "--key-env", key_env or "EPISODES_API_KEY"]
    if budget is not None:
        parts += ["--budget", f"{budget:g}"]
    for name in CARRIED_ENV:
        value = env.get(name) if env is not None else config.env(name)
        if value:
            if name in CARRIED_PATHS:
                value = os.path.abspath(os.path.expanduser(value))
            parts += ["--set", f"{name}={value}"]
    return " ".join(shlex.quote(p) for p in parts)


def check_key_env(name: str) -> str:
    """The name of the variable the remote hooks read the key from; refused unless a plain variable name
    (the shell script expands it)."""
    if not _VARIABLE.match(name):
        raise ConfigError(f"--key-env {name!r} is not an environment variable name; use e.g. EPISODES_API_KEY.")
    return name


def session_start_command(*, api: str, user: str, key_env: str, budget: float, log: Path) -> str | None:
    """The remote SessionStart hook as ``sh`` and ``curl`` (no Python starts at a session start), or None
    where either is missing (the Python hook serves then)."""
    sh, curl = shutil.which("sh"), shutil.which("curl")
    if not sh or not curl or not SESSION_START_SCRIPT.is_file():
        return None
    url = f"{api.rstrip('/')}{START_ROUTE}?user_id={quote(user, safe='')}"
    parts = ["sh", str(SESSION_START_SCRIPT), url, check_key_env(key_env), f"{budget:g}", str(log)]
    return " ".join(shlex.quote(p) for p in parts)


def is_ours(hook: object) -> bool:
    if not isinstance(hook, dict):
        return False
    command = str(hook.get("command", ""))
    slashed = command.replace(os.sep, "/")
    return MARKER in command or LAUNCH_MARKER in slashed or SCRIPT_MARKER in slashed


def read(path: Path) -> dict[str, Any]:
    """The settings in ``path`` ({} if there is no file); refuses a file it could not write back faithfully."""
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        return {}
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{path} is not valid JSON ({exc}); fix it by hand first, nothing was changed.") from None
    if not isinstance(data, dict) or not isinstance(data.get("hooks", {}), dict):
        raise ConfigError(f'{path} does not hold a settings object with a "hooks" object; fix it by hand first.')
    return data


def write(path: Path, data: Mapping[str, Any]) -> None:
    """Write atomically (a half-written settings.json would break every Claude Code session)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", "utf-8")
    os.replace(tmp, path)


def without_ours(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` with our hooks taken out (and the groups and events they leave empty)."""
    out = dict(settings)
    hooks = settings.get("hooks")
    if not isinstance(hooks, dict):
        return out
    kept_events: dict[str, Any] = {}
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            kept_events[event] = groups
            continue
        kept_groups = []
        for group in groups:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                inner = [h for h in group["hooks"] if not is_ours(h)]
                if not inner and group["hooks"]:
                    continue  # the group held only ours
                group = {**group, "hooks": inner}
            kept_groups.append(group)
        if kept_groups or not groups:
            kept_events[event] = kept_groups
    if kept_events:
        out["hooks"] = kept_events
    else:
        out.pop("hooks", None)
    return out


def with_ours(
    settings: Mapping[str, Any],
    command: str,
    events: Sequence[HookEvent] = EVENTS,
    budget: float | None = None,
    commands: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """``settings`` with exactly one group of ours per event, after the user's own groups: ``command``, or
    the event's own in ``commands``. With the hook's ``budget`` (seconds), Claude Code waits a few seconds
    longer than that."""
    out = without_ours(settings)
    hooks = dict(out.get("hooks") or {})
    for event in events:
        timeout = max(event.timeout, int(budget) + 5) if budget is not None else event.timeout
        run = (commands or {}).get(event.name, command)
        group: dict[str, Any] = {"hooks": [{"type": "command", "command": run, "timeout": timeout}]}
        if event.matcher is not None:
            group = {"matcher": event.matcher, **group}
        hooks[event.name] = [*(hooks.get(event.name) or []), group]
    out["hooks"] = hooks
    return out


def installed_commands(settings: Mapping[str, Any]) -> dict[str, list[str]]:
    """Our commands by event, as installed in ``settings``."""
    found: dict[str, list[str]] = {}
    hooks = settings.get("hooks")
    for event, groups in hooks.items() if isinstance(hooks, dict) else ():
        for group in groups if isinstance(groups, list) else ():
            for hook in group.get("hooks", []) if isinstance(group, dict) else ():
                if is_ours(hook):
                    found.setdefault(event, []).append(str(hook["command"]))
    return found


def settings_path(scope: str, project_dir: Path | None = None) -> Path:
    """Where install writes our hooks: ~/.claude/settings.json (``user``) or the project's
    .claude/settings.local.json (``project``: Claude Code's per-person file, never the shared one)."""
    if scope == "user":
        from jobs.claude_code.places import claude_home

        return claude_home() / "settings.json"
    return (project_dir or Path.cwd()) / ".claude" / "settings.local.json"


def shared_settings_path(project_dir: Path | None = None) -> Path:
    """The project's shared .claude/settings.json, where installs before settings.local.json put our
    hooks (install and uninstall take them out of it)."""
    return (project_dir or Path.cwd()) / ".claude" / "settings.json"
