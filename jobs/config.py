"""Settings: every knob of the system, grouped by concern, read from the environment once, when asked
for, into a frozen object.

Each setting is declared once, in :class:`Settings`, with its environment variable, type, default
and a one-line description; :func:`load` reads the variables from those declarations and
docs/configuration.md is generated from them (``python -m jobs.config_docs > docs/configuration.md``;
tests/test_configuration.py checks the page is current and that it names every variable read).
The fixed values (no variable; tests shrink them with ``settings.with_(lease_seconds=5)``) and the
variables that once set them are declared in jobs/config_fixed.py, which :class:`Settings` extends.

Nothing here reads the environment at import time, so tests (and callers) can point a process
elsewhere by setting variables before calling :func:`load`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

import platformdirs

from jobs.config_fixed import FixedValues, removed_variables
from jobs.config_values import (
    BOOLEAN,
    CRON,
    EMBEDDER,
    IDLE,
    LEVEL,
    PATH,
    POLICY,
    PUBLIC_URL,
    PURPOSES,
    RATE,
    RETENTION,
    SECRET,
    TOKEN,
    URL,
    Kind,
    choice,
    parse_duration,
    parse_purpose_map,
    setting,
    whole,
)
from jobs.errors import ConfigError
from jobs.prune_policy import PrunePolicy
from jobs.registry import EXTRACTORS, installed

__all__ = [
    "GROUPS",
    "OTHER_VARIABLES",
    "ConfigError",
    "Settings",
    "child_environment",
    "env",
    "load",
    "metrics_dir",
    "parse_duration",
    "parse_purpose_map",
    "removed_variables",
    "set_env",
    "share_metrics_dir",
]

log = logging.getLogger(__name__)

# The concerns, in the order the documentation lists them.
GROUPS: dict[str, str] = {
    "database": "Database",
    "model": "Model",
    "embeddings": "Embeddings",
    "ingest": "Ingest",
    "serve": "Serve (summarize, compress, prune)",
    "recall": "Recall",
    "privacy": "Privacy",
    "service": "Service (`episodes api`, MCP over HTTP)",
    "logs": "Logs",
}


def _extractor(name: str, raw: str) -> str:
    """auto or a name registered in the episodes.extractors entry points (jobs.registry)."""
    have = installed(EXTRACTORS)
    if raw.lower() != "auto" and raw.lower() not in have:
        raise ConfigError(f"{name}={raw!r}; use auto, {', '.join(have)} (the extractors installed).")
    return raw.lower()


EXTRACTOR = Kind("auto | anthropic | claude-code | openai | offline | another installed back end", _extractor)
_DATA = "the platform's user data directory (~/.local/share/episodes on Linux)"
_CACHE = "the platform's user cache directory (~/.cache/episodes on Linux)"


@dataclass(frozen=True)
class Settings(FixedValues):
    """Every knob of the system: the environment-backed settings declared here and the fixed values of
    :class:`jobs.config_fixed.FixedValues` (docs/configuration.md lists them, generated from these declarations)."""

    # --- database ---
    database_url: str | None = setting(
        group="database",
        env="DATABASE_URL",
        kind=URL,
        shown="unset: the embedded PostgreSQL",
        doc="PostgreSQL with pgvector to use; unset, the CLI starts an embedded one in EPISODES_HOME.",
    )
    service_database_url: str | None = setting(
        group="database",
        env="EPISODES_SERVICE_DATABASE_URL",
        kind=URL,
        shown="unset: episodes_service on the embedded server, else DATABASE_URL (with a warning)",
        doc="The login role `episodes api`, `episodes mcp` and serve's tenant work connect as (least privilege).",
    )
    home: Path = setting(
        group="database",
        env="EPISODES_HOME",
        kind=PATH,
        shown=_DATA,
        factory=lambda: Path(platformdirs.user_data_dir("episodes")),
        doc="Where the embedded PostgreSQL keeps its data (pgdata/) and the processes their state.",
    )
    pool_size: int = setting(
        8, group="database", env="EPISODES_POOL_SIZE", kind=whole(1), doc="Connections in each process's pool."
    )
    # --- model ---
    anthropic_api_key: str | None = setting(
        group="model",
        env="ANTHROPIC_API_KEY",
        shown="unset: the offline extractor",
        doc="Claude's API key; with it, `auto` summarizes with Claude.",
    )
    anthropic_base_url: str | None = setting(
        group="model",
        env="ANTHROPIC_BASE_URL",
        kind=URL,
        shown="unset: Anthropic's API",
        doc="Where the anthropic SDK sends calls.",
    )
    model: str = setting(
        "claude-haiku-4-5",
        group="model",
        env="EPISODES_MODEL",
        doc="The Claude model that summarizes and compresses; its prices come from the price table.",
    )
    extractor: str = setting(
        "auto",
        group="model",
        env="EPISODES_EXTRACTOR",
        kind=EXTRACTOR,
        doc="Who summarizes (docs/extractors.md). auto: anthropic when ANTHROPIC_API_KEY is set, "
        "else openai when OPENAI_BASE_URL is, else offline; never claude-code (opt in).",
    )
    openai_base_url: str | None = setting(
        group="model",
        env="OPENAI_BASE_URL",
        kind=URL,
        shown="unset: `auto` does not pick openai",
        doc="An OpenAI-compatible endpoint (the openai SDK reads it too); with it "
        "and no ANTHROPIC_API_KEY, `auto` summarizes through it.",
    )
    openai_api_key: str | None = setting(
        group="model",
        env="OPENAI_API_KEY",
        shown="unset: a placeholder",
        doc="The key the openai back end sends (a local server needs none).",
    )
    openai_mode: str = setting(
        "auto",
        group="model",
        env="EPISODES_OPENAI_MODE",
        kind=choice("auto", "json_schema", "tools", "json_object"),
        doc="How the openai back end asks for structured output; auto: json_schema, then "
        "tools, then json_object where the server rejects one (docs/openai-compatible.md).",
    )
    daily_token_cap: int | None = setting(
        group="model",
        env="EPISODES_DAILY_TOKEN_CAP",
        kind=whole(1),
        shown="unset: no cap",
        doc="Tokens the back end in use may spend per UTC day; then `run` and "
        "`serve` hold the rest of the queue for the next day.",
    )
    daily_session_cap: int | None = setting(
        group="model",
        env="EPISODES_DAILY_SESSION_CAP",
        kind=whole(1),
        shown="unset: no cap",
        doc="Sessions the back end in use may summarize per UTC day (as above).",
    )
    # --- embeddings ---
    embedder: str = setting(
        "minilm",
        group="embeddings",
        env="EPISODES_EMBEDDER",
        kind=EMBEDDER,
        doc="minilm: all-MiniLM-L6-v2 (int8) on ONNX Runtime, locally; minilm-fp32: unquantised; "
        "voyage: Voyage's API (the voyage extra; VOYAGE_API_KEY; docs: extractors); hashing: tests only.",
    )
    cache_dir: Path = setting(
        group="embeddings",
        env="EPISODES_CACHE_DIR",
        kind=PATH,
        shown=_CACHE,
        factory=lambda: Path(platformdirs.user_cache_dir("episodes")),
        doc="Where the embedding model's files are fetched to and its graph is built.",
    )
    model_dir: Path | None = setting(
        group="embeddings",
        env="EPISODES_MODEL_DIR",
        kind=PATH,
        shown="unset: fetched into EPISODES_CACHE_DIR",
        doc="all-MiniLM-L6-v2's files provided by the operator (air-gapped hosts).",
    )
    # --- ingest ---
    max_transcript_bytes: int = setting(
        4 * 1024 * 1024,
        group="ingest",
        env="EPISODES_MAX_TRANSCRIPT_BYTES",
        kind=whole(1024),
        shown="4194304 (4 MiB)",
        doc="The largest transcript accepted (its messages as JSON).",
    )
    idle_close_seconds: float | None = setting(
        1800.0,
        group="ingest",
        env="EPISODES_IDLE_CLOSE",
        kind=IDLE,
        shown="30m",
        doc="An open session with no new message for this long counts as ended.",
    )
    # --- serve ---
    serve_concurrency: int = setting(
        4,
        group="serve",
        env="EPISODES_SERVE_CONCURRENCY",
        kind=whole(1),
        doc="Summarize worker threads of `episodes serve` (--concurrency).",
    )
    compress_cron: str = setting(
        "0 3 1 1 *",
        group="serve",
        env="EPISODES_COMPRESS_CRON",
        kind=CRON,
        doc="When `episodes serve` compresses: 03:00 UTC on 1 January (--compress-cron).",
    )
    prune_policy: PrunePolicy | None = setting(
        group="serve",
        env="EPISODES_PRUNE_POLICY",
        kind=POLICY,
        shown="unset: no pruning (soft decay and yearly compression only)",
        doc="What `episodes serve` prunes (docs: lifecycle).",
    )
    prune_cron: str = setting(
        "30 3 * * *",
        group="serve",
        env="EPISODES_PRUNE_CRON",
        kind=CRON,
        doc="When `episodes serve` applies the pruning policy: 03:30 UTC daily.",
    )
    # --- recall ---
    purpose_map: Mapping[str, tuple[str, ...]] = setting(
        group="recall",
        env="EPISODES_PURPOSE_MAP",
        kind=PURPOSES,
        shown="unset: a purpose sees its own and general",
        factory=lambda: MappingProxyType({}),
        doc="Which purposes' episodes a recall of each purpose may see.",
    )
    # --- privacy ---
    redact: bool = setting(
        True,
        group="privacy",
        env="EPISODES_REDACT",
        kind=BOOLEAN,
        doc="Redact personal data from what the model sees and from what recall returns.",
    )
    store_redacted: bool = setting(
        False,
        group="privacy",
        env="EPISODES_STORE_REDACTED",
        kind=BOOLEAN,
        doc="Ingest stores transcripts already redacted.",
    )
    transcript_retention_seconds: float | None = setting(
        group="privacy",
        env="EPISODES_TRANSCRIPT_RETENTION",
        kind=RETENTION,
        shown="keep",
        doc="Message bodies of summarised transcripts are dropped after this long.",
    )

    # --- service ---
    api_rate_limit: float | None = setting(
        20.0,
        group="service",
        env="EPISODES_API_RATE_LIMIT",
        kind=RATE,
        doc="Requests per second per key when the key sets none.",
    )
    link_secret: str | None = setting(
        group="service",
        env="EPISODES_LINK_SECRET",
        kind=SECRET,
        shown="unset: one generated and kept in the database",
        doc="Signs the links to the user's memory page.",
    )
    public_url: str | None = setting(
        group="service",
        env="EPISODES_PUBLIC_URL",
        kind=PUBLIC_URL,
        shown="unset: links are relative",
        doc="Where users reach `episodes api` (memory-page links are built on it).",
    )
    metrics_token: str | None = setting(
        group="service",
        env="EPISODES_METRICS_TOKEN",
        kind=TOKEN,
        shown="unset: /metrics and /readyz are open",
        doc="Bearer token /metrics and /readyz require.",
    )
    # --- logs ---
    log_format: str = setting(
        "text",
        group="logs",
        env="EPISODES_LOG_FORMAT",
        kind=choice("text", "json"),
        doc="text for people, json lines for machines (stderr).",
    )
    log_level: str = setting(
        "INFO", group="logs", env="EPISODES_LOG_LEVEL", kind=LEVEL, doc="The least severe level logged."
    )

    @property
    def embedded(self) -> bool:
        """True when no DATABASE_URL is set and the embedded PostgreSQL is used."""
        return self.database_url is None

    @property
    def pgdata(self) -> Path:
        return self.home / "pgdata"

    @property
    def resolved_extractor(self) -> str:
        """The one place that decides what `auto` means: anthropic with ANTHROPIC_API_KEY, else openai
        with OPENAI_BASE_URL (when that back end is installed), else offline. Never claude-code: it
        spends the user's subscription, so the user names it."""
        if self.extractor != "auto":
            return self.extractor
        if self.anthropic_api_key:
            return "anthropic"
        if self.openai_base_url and "openai" in installed(EXTRACTORS):
            return "openai"
        return "offline"

    def with_(self, **changes: Any) -> Settings:
        return replace(self, **changes)


# Variables read by name outside Settings (documented with the settings): group, description.
OTHER_VARIABLES: dict[str, tuple[str, str]] = {
    "EPISODES_API_KEY": (
        "service",
        "The API key the Claude Code hooks and examples send in remote mode (another variable: --key-env).",
    ),
}


def default_model() -> str:
    """EPISODES_MODEL's default (Settings.model): the anthropic back end's model, which the openai back end reads
    as "unset" (jobs.llm.openai_wire.require_model, `episodes status`)."""
    return str(next(f.default for f in fields(Settings) if f.name == "model"))


_warned: set[str] = set()


def _warn_removed() -> None:
    for name, instead in removed_variables().items():
        if name in os.environ and name not in _warned:
            _warned.add(name)
            log.warning(
                "%s is set but no longer read: %s. Unset it.",
                name,
                instead,
                extra={"action": "removed_setting", "variable": name},
            )


def load() -> Settings:
    """Read settings from the environment now (unset or blank: the default)."""
    _warn_removed()
    values: dict[str, Any] = {}
    for f in fields(Settings):
        name = f.metadata.get("env")
        raw = os.environ.get(name) if name else None
        if name and raw is not None and raw.strip():
            values[f.name] = f.metadata["kind"].parse(name, raw.strip())
    return Settings(**values)


# numpy's OpenBLAS on one thread in every `episodes` process (api workers inherit it) unless the user set it; read
# when numpy loads, so jobs.cli.main sets it first. OpenBLAS runs recall's small products on every core and its
# threads then spin: a heavy user's recall cost its process 130-134 ms of CPU with two threads, ~30 ms with one
# (bench/recall.py, OPENBLAS_NUM_THREADS=2 against the default). A program calling recall() owns it (docs/recall.md).
BLAS_THREADS = "OPENBLAS_NUM_THREADS"


def one_blas_thread() -> None:
    """Set OpenBLAS to one thread for this process and its children, unless the environment says otherwise."""
    os.environ.setdefault(BLAS_THREADS, "1")


def child_environment(**changes: str) -> dict[str, str]:
    """This process's environment with ``changes``, for a child process (pip, when the model is fetched)."""
    return {**os.environ, **changes}


def env(name: str) -> str | None:
    """A variable whose name is given at run time, read now (None when unset or blank): the API key
    variable of `episodes claude-code install --key-env`, the settings its hooks carry, and Claude
    Code's own CLAUDE_CONFIG_DIR."""
    raw = os.environ.get(name)
    return raw.strip() if raw is not None and raw.strip() else None


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
