"""What `episodes claude-code install` was told, remembered for `claude-code sync` and `serve --claude-code-sync`.

The hooks carry their tenant and user in their command; sync and serve have no command of their
own to read them from, and storing the same sessions under another tenant or user (``local`` and
the login name, the defaults) duplicates them. So install records its choices in
$EPISODES_HOME/claude-code/install.json (owner-only), and sync and serve take each choice from it
when its option is not given; an option given always wins. One record per EPISODES_HOME: the last
install's choices, and every place an install put something in (the settings files holding our hooks,
the MCP server registrations), so that `claude-code uninstall` knows when the last of them is gone and
it may remove the record and what the hooks kept beside it (jobs.claude_code.leftovers).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from jobs.claude_code.places import TENANT, home, login_name, write_private
from jobs.errors import ConfigError

FILE_NAME = "install.json"
DEFAULT_KEY_ENV = "EPISODES_API_KEY"


@dataclass(frozen=True)
class Choices:
    tenant: str | None  # local mode's tenant; None in remote mode (the key's)
    user: str
    api: str | None = None  # remote mode: the URL of `episodes api`
    key_env: str | None = None  # remote mode: the variable holding the key
    places: tuple[str, ...] = ()  # the settings files our hooks were installed in (absolute paths)
    mcp: tuple[str, ...] = ()  # where the MCP server was registered: "user", or a project's folder


@dataclass(frozen=True)
class Resolved:
    """The tenant, user and mode a sync uses, and where they came from (for its output)."""

    tenant: str
    user: str
    api: str | None
    key_env: str
    recorded: Path | None  # the record any of them came from

    def line(self) -> str:
        mode = f"remote ({self.api}, key from ${self.key_env})" if self.api else f"tenant {self.tenant}"
        where = f" (as installed: {self.recorded})" if self.recorded else ""
        return f"Storing as user {self.user}, {mode}{where}."


def path(base: Path | None = None) -> Path:
    return (base or home()) / "claude-code" / FILE_NAME


def record(choices: Choices, base: Path | None = None) -> Path:
    """Remember what install was told (owner-only file); returns where."""
    target = path(base)
    write_private(target, json.dumps(asdict(choices), indent=2) + "\n")
    return target


def load(base: Path | None = None) -> Choices | None:
    """What the last install was told, or None (no install here, or a record that cannot be read)."""
    try:
        raw = json.loads(path(base).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("user"), str) or not raw["user"]:
        return None

    def text(name: str) -> str | None:
        value = raw.get(name)
        return value if isinstance(value, str) and value else None

    def texts(name: str) -> tuple[str, ...]:
        value = raw.get(name)
        return tuple(v for v in value if isinstance(v, str) and v) if isinstance(value, list) else ()

    return Choices(
        tenant=text("tenant"),
        user=raw["user"],
        api=text("api"),
        key_env=text("key_env"),
        places=texts("places"),
        mcp=texts("mcp"),
    )


def resolve(
    *,
    tenant: str | None,
    user: str | None,
    api: str | None = None,
    key_env: str | None = None,
    base: Path | None = None,
) -> Resolved:
    """Each choice from its option when given, else from install's record, else the default. The mode
    (tenant or API) is taken whole: an explicit ``tenant`` or ``api`` decides it, else the record does."""
    saved = load(base)
    used = False
    if tenant is None and api is None and saved is not None:
        tenant, api, used = saved.tenant, saved.api, True
        if api and key_env is None:
            key_env = saved.key_env
    if user is None and saved is not None:
        user, used = saved.user, True
    return Resolved(
        tenant=tenant or TENANT,
        user=user or login_name(),
        api=api,
        key_env=key_env or DEFAULT_KEY_ENV,
        recorded=path(base) if used else None,
    )


def serve_identity(tenant: str | None, user: str | None, say: Callable[[str], object]) -> tuple[str, str]:
    """The (tenant, user) `serve --claude-code-sync` stores this machine's sessions under, said through ``say``.
    Serve writes to its own database, so a remote install's record (whose tenant is the key's) needs --tenant."""
    chosen = resolve(tenant=tenant, user=user)
    if chosen.api:
        raise ConfigError(
            f"The Claude Code hooks were installed in remote mode ({chosen.api}), whose tenant is the "
            "key's: run `episodes claude-code sync` (it stores through the API), or give serve "
            "--claude-code-tenant."
        )
    say(f"Claude Code sync: {chosen.line()}")
    return chosen.tenant, chosen.user
