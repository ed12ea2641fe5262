"""Where the hooks keep their log and per-session state, and the purpose a project's sessions get.

Light imports only (the session-file reader and jobs.config): the hook reads these before it knows
whether it will import anything else.

Project scoping rides on ``purpose`` (jobs.recall.purposes), not ``agent_id``: recall already filters
by purpose (a purpose sees its own episodes and ``general`` ones, unless EPISODES_PURPOSE_MAP says
otherwise), analysts already group by it, and ``agent_id`` stays ``claude-code`` for every project.
So a session in a project recalls that project's sessions plus the user's ``general`` episodes (what
other hosts, chat above all, learnt about the user), and not another project's coding sessions.
The purpose is ``cc-<folder name>-<16 hex of the full path>`` (readable in recall and SQL; two
folders of one name, or a look-alike made to collide, kept apart: 64 bits); the session-file reader sets it, so a session stored by a hook,
by sync or by `episodes ingest --format claude-code` is the same record. Moving a project's folder
starts a new purpose (EPISODES_PURPOSE_MAP can join the old one to it).
"""

from __future__ import annotations

import os
from pathlib import Path

from jobs.config import env
from jobs.formats.claude_code import AGENT_ID, project_purpose

TENANT = "local"  # the tenant of Claude Code sessions when none is named, as `episodes ingest --format claude-code`
LOG_NAME = "claude-code-hooks.log"


def home() -> Path:
    """$EPISODES_HOME, else the default of jobs.config (read here without importing it)."""
    raw = env("EPISODES_HOME")
    if raw:
        return Path(raw).expanduser()
    import platformdirs  # what jobs.config uses for the default; small

    return Path(platformdirs.user_data_dir("episodes"))


def log_file(base: Path | None = None) -> Path:
    """The hooks' log: $EPISODES_HOME/logs/claude-code-hooks.log."""
    return (base or home()) / "logs" / LOG_NAME


def state_dir(base: Path | None = None) -> Path:
    """Per-session state (what was injected, whether the session ended): $EPISODES_HOME/claude-code/sessions."""
    return (base or home()) / "claude-code" / "sessions"


def private_dir(path: Path) -> Path:
    """``path`` as a folder only its owner can enter (0700): created so (with any missing parent), or
    tightened if it was not. The hooks' log and state say which projects a user works on, and when."""
    for folder in [*reversed(path.parents), path]:
        if not folder.exists():
            folder.mkdir(mode=0o700, exist_ok=True)
    if path.stat().st_mode & 0o077:
        os.chmod(path, 0o700)
    return path


def append_private(path: Path, text: str) -> None:
    """Append ``text`` to ``path``, a file only its owner can read (0600; an older, wider file is tightened)."""
    private_dir(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        if os.fstat(fd).st_mode & 0o077:
            os.fchmod(fd, 0o600)
        os.write(fd, text.encode("utf-8", "replace"))
    finally:
        os.close(fd)


def write_private(path: Path, text: str) -> None:
    """Replace ``path`` atomically by a file holding ``text`` that only its owner can read (0600)."""
    private_dir(path.parent)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # a stale temporary file of another mode
        os.write(fd, text.encode("utf-8"))
    finally:
        os.close(fd)
    os.replace(tmp, path)


def claude_home() -> Path:
    """Claude Code's folder: $CLAUDE_CONFIG_DIR, else ~/.claude."""
    raw = env("CLAUDE_CONFIG_DIR")
    return Path(raw).expanduser() if raw else Path.home() / ".claude"


def login_name() -> str:
    """The user of this machine's sessions when none is named (as `episodes ingest --format claude-code`)."""
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container)
        return "local"


__all__ = [
    "AGENT_ID",
    "LOG_NAME",
    "TENANT",
    "append_private",
    "claude_home",
    "home",
    "log_file",
    "login_name",
    "private_dir",
    "project_purpose",
    "state_dir",
    "write_private",
]
