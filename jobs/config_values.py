"""How an environment variable's text becomes a setting's value: each :class:`Kind` says what a
variable holds, as the documentation states it, and reads its text (jobs.config declares which
variable has which kind). Errors name the variable and say what to write instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any
from urllib.parse import urlsplit

from jobs.concepts import PURPOSE
from jobs.errors import ConfigError, PolicyInvalid
from jobs.prune_policy import PrunePolicy, parse_policy


@dataclass(frozen=True)
class Kind:
    """What a variable holds, as the documentation says it, and how its text is read (``name`` for the
    error message; the text is stripped and not blank: unset or blank means the default)."""

    describe: str
    parse: Callable[[str, str], Any]


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d)?\s*$")
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}


def _boolean(name: str, raw: str) -> bool:
    value = raw.lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigError(f"{name}={raw!r} is not a boolean; use true or false.")


def whole(minimum: int) -> Kind:
    def parse(name: str, raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            raise ConfigError(f"{name}={raw!r} is not a whole number.") from None
        if value < minimum:
            raise ConfigError(f"{name}={value} must be at least {minimum}.")
        return value

    return Kind(f"whole number ≥ {minimum}", parse)


def parse_duration(text: str, what: str = "duration") -> float:
    """``90s``, ``15m``, ``2h``, ``1d`` or plain seconds -> seconds."""
    match = _DURATION.match(str(text).lower())
    if not match:
        raise ConfigError(f"{what}={text!r} is not a duration; use e.g. 90s, 15m, 2h or 1d.")
    return float(match.group(1)) * _DURATION_UNITS[match.group(2)]


def _duration_at_least(name: str, raw: str, minimum: float) -> float:
    value = parse_duration(raw, name)
    if value < minimum:
        raise ConfigError(f"{name}={raw!r} must be at least {minimum:g} seconds.")
    return value


def choice(*options: str) -> Kind:
    def parse(name: str, raw: str) -> str:
        if raw.lower() not in options:
            raise ConfigError(f"{name}={raw!r}; use {', '.join(options[:-1])} or {options[-1]}.")
        return raw.lower()

    return Kind(" | ".join(options), parse)


def _cron(name: str, raw: str) -> str:
    """A schedule that `episodes serve` can run: checked by APScheduler itself, as serve reads it, so a
    wrong one stops the configuration load rather than the scheduler's start. APScheduler numbers the
    days of the week from Monday (0 = mon); names (mon-fri, sun) mean the same there as in crontab."""
    from apscheduler.triggers.cron import CronTrigger  # here, not at import: most commands never schedule

    try:
        CronTrigger.from_crontab(raw, timezone="UTC")
    except ValueError as exc:
        raise ConfigError(
            f"{name}={raw!r} is not a schedule APScheduler accepts ({exc}); write a crontab line of five fields "
            "(minute hour day month weekday, UTC), e.g. '0 3 1 1 *' for 03:00 on 1 January or '30 3 * * mon-fri'."
        ) from None
    return raw


def _idle_close(name: str, raw: str) -> float | None:
    return None if raw.lower() in {"off", "0", "none"} else _duration_at_least(name, raw, 1.0)


def _retention(name: str, raw: str) -> float | None:
    return None if raw.lower() in {"keep", "off", "never"} else _duration_at_least(name, raw, 86400.0)


def parse_purpose_map(raw: str, what: str = "EPISODES_PURPOSE_MAP") -> Mapping[str, tuple[str, ...]]:
    """``marketing=marketing,general;support=support,billing,general`` -> which purposes each may see."""
    mapping: dict[str, tuple[str, ...]] = {}
    for entry in filter(None, (part.strip() for part in raw.split(";"))):
        key, sep, values = entry.partition("=")
        names = tuple(v.strip() for v in values.split(",") if v.strip())
        if not sep or not PURPOSE.match(key.strip()) or not names or not all(PURPOSE.match(n) for n in names):
            raise ConfigError(
                f"{what} entry {entry!r} is invalid; use purpose=allowed,allowed;other=... e.g. marketing=marketing,general"
            )
        mapping[key.strip()] = names
    return MappingProxyType(mapping)


def _policy(name: str, raw: str) -> PrunePolicy | None:
    if raw.lower() in {"off", "none"}:
        return None
    try:
        return parse_policy(raw)
    except PolicyInvalid as exc:
        raise ConfigError(f"{name}: {exc}") from None


def _rate(name: str, raw: str) -> float | None:
    if raw.lower() in {"off", "none"}:
        return None
    value = float(raw) if re.fullmatch(r"\d+(\.\d*)?|\.\d+", raw) else 0.0
    if value <= 0:
        raise ConfigError(f"{name}={raw!r} must be a positive number of requests per second, or off.")
    return value


def _secret(name: str, raw: str) -> str:
    """At least 32 characters: guessable secrets make forgeable links."""
    if len(raw) < 32:
        raise ConfigError(
            f"{name} is {len(raw)} characters; use at least 32 random characters "
            "(e.g. `openssl rand -hex 32`), or unset it to let the database keep one."
        )
    return raw


def _public_url(name: str, raw: str) -> str:
    """Memory links are built on it, never on a request's Host header."""
    parts = urlsplit(raw)
    if parts.scheme not in {"http", "https"} or not parts.hostname or parts.query or parts.fragment:
        raise ConfigError(
            f"{name}={raw!r}; use the address users reach the service at, e.g. "
            "https://memory.example.com or https://example.com/episodes (no query, no fragment)."
        )
    return raw.rstrip("/")


def _token(name: str, raw: str) -> str:
    if len(raw) < 32 or not raw.isascii() or not raw.isprintable() or " " in raw:
        raise ConfigError(
            f"{name} must be at least 32 printable ASCII characters without spaces "
            "(e.g. `openssl rand -hex 32`), or unset."
        )
    return raw


TEXT = Kind("text", lambda name, raw: raw)
URL = Kind("URL", lambda name, raw: raw)
PATH = Kind("path", lambda name, raw: Path(raw).expanduser())
BOOLEAN = Kind("true | false", _boolean)
CRON = Kind("crontab line (UTC; weekday 0 = Monday, or mon..sun)", _cron)
IDLE = Kind("duration ≥ 1s (90s, 15m, 2h, 1d) | off", _idle_close)
RETENTION = Kind("duration ≥ 1d | keep", _retention)
PURPOSES = Kind("purpose=allowed,allowed;other=...", lambda name, raw: parse_purpose_map(raw, name))
POLICY = Kind("pruning policy (docs: lifecycle) | off", _policy)
RATE = Kind("requests per second | off", _rate)
SECRET = Kind("≥ 32 characters", _secret)
PUBLIC_URL = Kind("http(s) URL", _public_url)
TOKEN = Kind("≥ 32 printable ASCII characters", _token)
LEVEL = Kind("DEBUG | INFO | WARNING | ERROR", lambda name, raw: raw.upper())
EMBEDDER = Kind("minilm | minilm-fp32 | voyage[:model[:dim]] | hashing[:dim]", lambda name, raw: raw.lower())


def setting(
    default: Any = None,
    *,
    group: str,
    doc: str,
    env: str | None = None,
    kind: Kind = TEXT,
    shown: str | None = None,
    factory: Callable[[], Any] | None = None,
    was: str | None = None,
    flag: str | None = None,
) -> Any:
    """One setting's declaration: ``env`` names its variable (None: a fixed value), ``shown`` how the
    documentation states the default, ``was`` the variable a fixed value had before, ``flag`` the
    command-line option that sets it for one command."""
    meta = {"group": group, "doc": doc, "env": env, "kind": kind, "shown": shown, "was": was, "flag": flag}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)
