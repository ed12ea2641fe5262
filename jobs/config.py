"""Settings, read from the environment once, when asked for, into a frozen object.

Nothing here reads the environment at import time, so tests (and callers) can point a
process elsewhere by setting variables before calling :func:`load`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any
from urllib.parse import urlsplit

import platformdirs

from jobs.errors import ConfigError, PolicyInvalid
from jobs.prune_policy import PrunePolicy, parse_policy

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def child_environment(**changes: str) -> dict[str, str]:
    """This process's environment with ``changes``, for a child process (pip, when the model is fetched)."""
    return {**os.environ, **changes}


def env_bool(name: str, default: bool) -> bool:
    """A boolean environment variable read now; unset or empty means ``default``."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigError(f"{name}={raw!r} is not a boolean; use true or false.")


def _int(name: str, default: int, minimum: int = 0) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a whole number.") from None
    if value < minimum:
        raise ConfigError(f"{name}={value} must be at least {minimum}.")
    return value


def _float(name: str, default: float, minimum: float = 0.0) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a number.") from None
    if value < minimum:
        raise ConfigError(f"{name}={value} must be at least {minimum}.")
    return value


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d)?\s*$")
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}
_PURPOSE = re.compile(r"^[a-z0-9_-]{1,64}$")


def parse_duration(text: str, what: str = "duration") -> float:
    """``90s``, ``15m``, ``2h``, ``1d`` or plain seconds -> seconds."""
    match = _DURATION.match(str(text).lower())
    if not match:
        raise ConfigError(f"{what}={text!r} is not a duration; use e.g. 90s, 15m, 2h or 1d.")
    return float(match.group(1)) * _DURATION_UNITS[match.group(2)]


def _duration(name: str, default: float | None, minimum: float = 0.0) -> float | None:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = parse_duration(raw, name)
    if value < minimum:
        raise ConfigError(f"{name}={raw!r} must be at least {minimum:g} seconds.")
    return value


def _idle_close(name: str, default: float) -> float | None:
    """A duration of at least a second, or ``off`` / ``0`` (None: never)."""
    raw = os.environ.get(name)
    if raw is not None and raw.strip().lower() in {"off", "0", "none"}:
        return None
    return _duration(name, default, minimum=1.0)


def _retention(name: str) -> float | None:
    """A duration of at least a day, or ``keep`` (the default: None, transcripts are kept)."""
    raw = os.environ.get(name)
    if raw is None or raw.strip().lower() in {"", "keep", "off", "never"}:
        return None
    return _duration(name, None, minimum=86400.0)


def parse_purpose_map(raw: str, what: str = "EPISODES_PURPOSE_MAP") -> Mapping[str, tuple[str, ...]]:
    """``marketing=marketing,general;support=support,billing,general`` -> which purposes each may see."""
    mapping: dict[str, tuple[str, ...]] = {}
    for entry in filter(None, (part.strip() for part in raw.split(";"))):
        key, sep, values = entry.partition("=")
        names = tuple(v.strip() for v in values.split(",") if v.strip())
        if not sep or not _PURPOSE.match(key.strip()) or not names or not all(_PURPOSE.match(n) for n in names):
            raise ConfigError(
                f"{what} entry {entry!r} is invalid; use purpose=allowed,allowed;other=... e.g. marketing=marketing,general"
            )
        mapping[key.strip()] = names
    return MappingProxyType(mapping)


def _cron(name: str, default: str) -> str:
    value = _str(name, default) or default
    if len(value.split()) != 5:
        raise ConfigError(f"{name}={value!r} is not a crontab line of five fields, e.g. '0 3 1 1 *'.")
    return value


def _str(name: str, default: str | None) -> str | None:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    return raw.strip()


@dataclass(frozen=True)
class Settings:
    """Every knob of the system. The README's configuration table lists the variables."""

    database_url: str | None = None
    # The login role of `episodes api` and `episodes mcp` (README "Database roles"); None: on the embedded
    # server the role episodes_service over its socket, elsewhere DATABASE_URL (with a warning).
    service_database_url: str | None = None
    application_name: str = "episodes"  # how this process's connections show in pg_stat_activity
    home: Path = field(default_factory=lambda: Path(platformdirs.user_data_dir("episodes")))
    pool_size: int = 8
    anthropic_api_key: str | None = None
    anthropic_base_url: str | None = None
    model: str = "claude-haiku-4-5"
    extractor: str = "auto"  # auto | anthropic | offline
    max_retries: int = 4
    model_timeout_s: float = 60.0
    max_output_tokens: int = 2048
    transcript_token_budget: int = 24_000
    max_attempts: int = 5
    lease_seconds: int = 40
    embedder: str = "minilm"
    max_transcript_bytes: int = 4 * 1024 * 1024
    max_messages: int = 5_000
    tool_result_chars: int = 400  # characters kept of each tool result in a stored transcript (jobs.formats.shapes)
    log_format: str = "text"  # text | json
    log_level: str = "INFO"
    price_input_per_mtok: float = 1.0
    price_output_per_mtok: float = 5.0
    recall_cache_rows: int = 300_000
    recall_on_workers: bool = True  # on a Citus cluster, recall reads from the tenant's worker (jobs.citus.routes)
    recall_pack_rows: int = 1_000  # users with at least this many candidates get a recall pack (0: none)
    redact: bool = True
    purpose_map: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: MappingProxyType({}))
    embed_threads: int = 1
    cache_dir: Path = field(default_factory=lambda: Path(platformdirs.user_cache_dir("episodes")))
    model_dir: Path | None = None  # all-MiniLM-L6-v2's files, provided by the operator (air-gapped hosts); None: fetched
    serve_concurrency: int = 4
    poll_seconds: float = 10.0
    maintenance_seconds: float = 30.0
    compress_cron: str = "0 3 1 1 *"  # 03:00 UTC on 1 January
    idle_close_seconds: float | None = 1800.0  # None: never close idle sessions
    shutdown_deadline_seconds: float = 30.0
    stale_grace_seconds: float = 30 * 86400.0  # open items overdue by more than this are stale
    stale_age_seconds: float = 180 * 86400.0  # ... and items without a due date older than this
    transcript_retention_seconds: float | None = None  # None: keep message bodies forever
    store_redacted: bool = False  # ingest stores transcripts already redacted
    pool_timeout_seconds: float = 10.0  # wait for a pooled connection before giving up (the API answers 503)
    api_max_body: int = 5 * 1024 * 1024  # largest request body `episodes api` reads (413 above)
    api_key_cache_seconds: float = 5.0  # how long a verified key is trusted without a lookup (revocation bound)
    api_rate_limit: float | None = 20.0  # requests per second per key when the key sets none; None: unlimited
    link_secret: str | None = None  # signs memory-page links; None: one generated and kept in the database
    public_url: str | None = None  # where users reach `episodes api` (memory links); None: links are relative
    metrics_token: str | None = None  # bearer token /metrics and /readyz require; None: they are open
    prune_policy: PrunePolicy | None = None  # None: no pruning policy (soft decay and yearly compression only)
    prune_cron: str = "30 3 * * *"  # when `serve` applies prune_policy: 03:30 UTC daily
    crash_at: str | None = None  # crash tests only: kill -9 at this named point (jobs.faults)

    @property
    def embedded(self) -> bool:
        """True when no DATABASE_URL is set and the embedded PostgreSQL is used."""
        return self.database_url is None

    @property
    def pgdata(self) -> Path:
        return self.home / "pgdata"

    @property
    def resolved_extractor(self) -> str:
        """`auto` means Claude when an API key is configured, the offline extractor otherwise."""
        if self.extractor == "auto":
            return "anthropic" if self.anthropic_api_key else "offline"
        return self.extractor

    def with_(self, **changes: Any) -> "Settings":
        return replace(self, **changes)


def load() -> Settings:
    """Read settings from the environment now."""
    extractor = (_str("EPISODES_EXTRACTOR", "auto") or "auto").lower()
    if extractor not in {"auto", "anthropic", "offline"}:
        raise ConfigError(f"EPISODES_EXTRACTOR={extractor!r}; use auto, anthropic or offline.")
    log_format = (_str("EPISODES_LOG_FORMAT", "text") or "text").lower()
    if log_format not in {"text", "json"}:
        raise ConfigError(f"EPISODES_LOG_FORMAT={log_format!r}; use text or json.")
    home = _str("EPISODES_HOME", None)
    cache_dir = _str("EPISODES_CACHE_DIR", None)
    return Settings(
        database_url=_str("DATABASE_URL", None),
        service_database_url=_str("EPISODES_SERVICE_DATABASE_URL", None),
        home=Path(home).expanduser() if home else Path(platformdirs.user_data_dir("episodes")),
        pool_size=_int("EPISODES_POOL_SIZE", 8, minimum=1),
        anthropic_api_key=_str("ANTHROPIC_API_KEY", None),
        anthropic_base_url=_str("ANTHROPIC_BASE_URL", None),
        model=_str("EPISODES_MODEL", "claude-haiku-4-5") or "claude-haiku-4-5",
        extractor=extractor,
        max_retries=_int("EPISODES_MAX_RETRIES", 4),
        model_timeout_s=_float("EPISODES_MODEL_TIMEOUT", 60.0, minimum=0.1),
        max_output_tokens=_int("EPISODES_MAX_OUTPUT_TOKENS", 2048, minimum=256),
        transcript_token_budget=_int("EPISODES_TRANSCRIPT_TOKEN_BUDGET", 24_000, minimum=500),
        max_attempts=_int("EPISODES_MAX_ATTEMPTS", 5, minimum=1),
        lease_seconds=_int("EPISODES_LEASE_SECONDS", 40, minimum=5),
        embedder=(_str("EPISODES_EMBEDDER", "minilm") or "minilm").lower(),
        max_transcript_bytes=_int("EPISODES_MAX_TRANSCRIPT_BYTES", 4 * 1024 * 1024, minimum=1024),
        max_messages=_int("EPISODES_MAX_MESSAGES", 5_000, minimum=1),
        tool_result_chars=_int("EPISODES_TOOL_RESULT_CHARS", 400, minimum=40),
        log_format=log_format,
        log_level=(_str("EPISODES_LOG_LEVEL", "INFO") or "INFO").upper(),
        price_input_per_mtok=_float("EPISODES_PRICE_INPUT_PER_MTOK", 1.0),
        price_output_per_mtok=_float("EPISODES_PRICE_OUTPUT_PER_MTOK", 5.0),
        recall_cache_rows=_int("EPISODES_RECALL_CACHE_ROWS", 300_000, minimum=0),
        recall_on_workers=env_bool("EPISODES_RECALL_ON_WORKERS", True),
        recall_pack_rows=_int("EPISODES_RECALL_PACK_ROWS", 1_000, minimum=0),
        redact=env_bool("EPISODES_REDACT", True),
        purpose_map=parse_purpose_map(os.environ.get("EPISODES_PURPOSE_MAP", "")),
        embed_threads=_int("EPISODES_EMBED_THREADS", 1, minimum=1),
        cache_dir=Path(cache_dir).expanduser() if cache_dir else Path(platformdirs.user_cache_dir("episodes")),
        model_dir=Path(model_dir).expanduser() if (model_dir := _str("EPISODES_MODEL_DIR", None)) else None,
        serve_concurrency=_int("EPISODES_SERVE_CONCURRENCY", 4, minimum=1),
        poll_seconds=_duration("EPISODES_POLL_INTERVAL", 10.0, minimum=0.05) or 10.0,
        maintenance_seconds=_duration("EPISODES_MAINTENANCE_INTERVAL", 30.0, minimum=0.05) or 30.0,
        compress_cron=_cron("EPISODES_COMPRESS_CRON", "0 3 1 1 *"),
        idle_close_seconds=_idle_close("EPISODES_IDLE_CLOSE", 1800.0),
        shutdown_deadline_seconds=_duration("EPISODES_SHUTDOWN_DEADLINE", 30.0) or 0.0,
        stale_grace_seconds=_duration("EPISODES_STALE_GRACE", 30 * 86400.0) or 0.0,
        stale_age_seconds=_duration("EPISODES_STALE_AGE", 180 * 86400.0) or 0.0,
        transcript_retention_seconds=_retention("EPISODES_TRANSCRIPT_RETENTION"),
        store_redacted=env_bool("EPISODES_STORE_REDACTED", False),
        pool_timeout_seconds=_duration("EPISODES_POOL_TIMEOUT", 10.0, minimum=0.1) or 10.0,
        api_max_body=_int("EPISODES_API_MAX_BODY", 5 * 1024 * 1024, minimum=1024),
        api_key_cache_seconds=_duration("EPISODES_API_KEY_CACHE", 5.0) or 0.0,
        api_rate_limit=_rate("EPISODES_API_RATE_LIMIT", 20.0),
        link_secret=_secret("EPISODES_LINK_SECRET"),
        public_url=_public_url("EPISODES_PUBLIC_URL"),
        metrics_token=_token("EPISODES_METRICS_TOKEN"),
        prune_policy=_policy("EPISODES_PRUNE_POLICY"),
        prune_cron=_cron("EPISODES_PRUNE_CRON", "30 3 * * *"),
        crash_at=_str("EPISODES_CRASH_AT", None),
    )


def _policy(name: str) -> PrunePolicy | None:
    """A pruning policy (jobs.prune_policy), or unset / ``off`` for none."""
    raw = os.environ.get(name)
    if raw is None or raw.strip().lower() in {"", "off", "none"}:
        return None
    try:
        return parse_policy(raw)
    except PolicyInvalid as exc:
        raise ConfigError(f"{name}: {exc}") from None


def _rate(name: str, default: float | None = None) -> float | None:
    """Requests per second (a positive number), ``off`` for no limit, unset for ``default``."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    if raw.strip().lower() in {"off", "none"}:
        return None
    value = _float(name, 0.0)
    if value <= 0:
        raise ConfigError(f"{name}={raw!r} must be a positive number of requests per second, or off.")
    return value


def _secret(name: str) -> str | None:
    """A signing secret: unset, or at least 32 characters (guessable secrets make forgeable links)."""
    value = _str(name, None)
    if value is not None and len(value) < 32:
        raise ConfigError(f"{name} is {len(value)} characters; use at least 32 random characters "
                          "(e.g. `openssl rand -hex 32`), or unset it to let the database keep one.")
    return value


def _public_url(name: str) -> str | None:
    """The service's address as its users reach it (``https://host[:port][/prefix]``), without a
    trailing slash; memory links are built on it, never on a request's Host header."""
    value = _str(name, None)
    if value is None:
        return None
    parts = urlsplit(value)
    if parts.scheme not in {"http", "https"} or not parts.hostname or parts.query or parts.fragment:
        raise ConfigError(f"{name}={value!r}; use the address users reach the service at, e.g. "
                          "https://memory.example.com or https://example.com/episodes (no query, no fragment).")
    return value.rstrip("/")


def _token(name: str) -> str | None:
    """A bearer token an operator sets: unset, or at least 32 characters (e.g. `openssl rand -hex 32`)."""
    value = _str(name, None)
    if value is not None and (len(value) < 32 or not value.isascii() or not value.isprintable() or " " in value):
        raise ConfigError(f"{name} must be at least 32 printable ASCII characters without spaces "
                          "(e.g. `openssl rand -hex 32`), or unset.")
    return value


def env(name: str) -> str | None:
    """A variable whose name is given at run time, read now (None when unset or blank): the API key
    variable of `episodes claude-code install --key-env`, the settings its hooks carry, and Claude
    Code's own CLAUDE_CONFIG_DIR."""
    return _str(name, None)


def set_env(name: str, value: str) -> None:
    """Set a variable for this process before its settings are read: a Claude Code hook's
    ``--set NAME=VALUE`` (EPISODES_HOME and the like, carried in its command by the install)."""
    os.environ[name] = value


def share_metrics_dir(path: Path) -> None:
    """Tell prometheus-client (and the API's worker processes, which inherit it) where the
    multiprocess metrics live. A write to the environment (as set_env); it is prometheus-client's own
    variable, read when the first metric is made, so it is set before any worker starts."""
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(path)


def metrics_dir() -> Path | None:
    """The multiprocess metrics directory set by :func:`share_metrics_dir` (None: one process)."""
    raw = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    return Path(raw) if raw else None
