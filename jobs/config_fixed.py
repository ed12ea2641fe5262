"""The fixed values: numbers no operator needs to change, declared beside the settings so that one object
carries them (tests shrink them: ``settings.with_(lease_seconds=5)``) but kept out of jobs/config.py,
which holds what the environment sets. Each group names the modules that read it; those modules sit
above jobs.config in the import contract, so the values are declared here, not in them.

Several were environment variables once (``was``): the removed-variable shims live here too
(:func:`removed_variables`), and jobs.config warns once when one of them is still set.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from jobs.config_values import setting

__all__ = ["DAY", "GONE_ELSEWHERE", "FixedValues", "removed_variables"]

DAY = 86400.0


@dataclass(frozen=True)
class FixedValues:
    """The fixed values of :class:`jobs.config.Settings` (docs/configuration.md lists them under "Fixed values")."""

    # --- database: read by jobs.db (the pool, pg_stat_activity, Citus routing); jobs.cli names each command ---
    application_name: str = setting(
        "episodes", group="database", doc="How this process's connections show in pg_stat_activity (set per command)."
    )
    pool_timeout_seconds: float = setting(
        10.0,
        group="database",
        shown="10s",
        was="EPISODES_POOL_TIMEOUT",
        doc="Wait for a pooled connection before giving up (the API answers 503).",
    )
    recall_on_workers: bool = setting(
        True,
        group="database",
        was="EPISODES_RECALL_ON_WORKERS",
        doc="On a Citus cluster, recall reads from the tenant's worker (jobs.citus.routes).",
    )
    # --- model: read by jobs.llm (clients, retries, time-outs, the claude CLI) and the model extractors (budget) ---
    max_retries: int = setting(
        4,
        group="model",
        was="EPISODES_MAX_RETRIES",
        doc="Retries of the anthropic SDK (429 with retry-after, 529, 5xx).",
    )
    model_timeout_s: float = setting(
        60.0, group="model", shown="60s", was="EPISODES_MODEL_TIMEOUT", doc="Seconds one model call may take."
    )
    max_output_tokens: int = setting(
        2048, group="model", was="EPISODES_MAX_OUTPUT_TOKENS", doc="Output tokens asked for per call."
    )
    claude_code_timeout_seconds: float = setting(
        300.0,
        group="model",
        shown="300s",
        doc="Seconds one `claude -p` run of the claude-code extractor may take, its own retries included.",
    )
    transcript_token_budget: int = setting(
        24_000,
        group="model",
        was="EPISODES_TRANSCRIPT_TOKEN_BUDGET",
        doc="A transcript larger than this is split and reduced, never truncated.",
    )
    # --- embeddings: read by jobs.embeddings ---
    embed_threads: int = setting(
        1, group="embeddings", was="EPISODES_EMBED_THREADS", doc="ONNX Runtime threads per embedding call."
    )
    # --- ingest: read by jobs.ingest, jobs.summarize.claim and jobs.formats.shapes ---
    max_messages: int = setting(
        5_000, group="ingest", was="EPISODES_MAX_MESSAGES", doc="The most messages one transcript may hold."
    )
    tool_result_chars: int = setting(
        400,
        group="ingest",
        was="EPISODES_TOOL_RESULT_CHARS",
        doc="Characters kept of each tool result in a stored transcript (jobs.formats.shapes).",
    )
    # --- serve: read by jobs.summarize (claims, attempts) and jobs.serve (its loop; its flags override) ---
    max_attempts: int = setting(
        5,
        group="serve",
        was="EPISODES_MAX_ATTEMPTS",
        doc="Attempts at a transcript before it is dead-lettered (`episodes retry` requeues).",
    )
    lease_seconds: int = setting(
        40,
        group="serve",
        shown="40s",
        was="EPISODES_LEASE_SECONDS",
        doc="A claim's lease; a worker that dies loses its claim after this.",
    )
    poll_seconds: float = setting(
        10.0,
        group="serve",
        shown="10s",
        was="EPISODES_POLL_INTERVAL",
        flag="episodes serve --poll",
        doc="The fallback poll of `episodes serve` (LISTEN/NOTIFY wakes it at once).",
    )
    maintenance_seconds: float = setting(
        30.0,
        group="serve",
        shown="30s",
        was="EPISODES_MAINTENANCE_INTERVAL",
        flag="episodes serve --maintenance",
        doc="How often serve rescues expired claims and closes idle sessions.",
    )
    shutdown_deadline_seconds: float = setting(
        30.0,
        group="serve",
        shown="30s",
        was="EPISODES_SHUTDOWN_DEADLINE",
        flag="episodes serve --shutdown-deadline",
        doc="On SIGTERM, how long work in flight may take (serve and api).",
    )
    # --- recall: read by jobs.recall.recaller and the service's reads of open items ---
    stale_grace_seconds: float = setting(
        30 * DAY,
        group="recall",
        shown="30d",
        was="EPISODES_STALE_GRACE",
        doc="An open item overdue by more than this is stale (leaves recall unless related).",
    )
    stale_age_seconds: float = setting(
        180 * DAY,
        group="recall",
        shown="180d",
        was="EPISODES_STALE_AGE",
        doc="... and an open item without a due date older than this.",
    )
    # --- service: read by jobs.service (middleware, server, keys, errors) ---
    api_max_body: int = setting(
        5 * 1024 * 1024,
        group="service",
        shown="5242880 (5 MiB)",
        was="EPISODES_API_MAX_BODY",
        doc="The largest request body `episodes api` reads (413 above).",
    )
    api_key_cache_seconds: float = setting(
        5.0,
        group="service",
        shown="5s",
        was="EPISODES_API_KEY_CACHE",
        doc="How long a verified key is trusted without a lookup (bounds revocation).",
    )
    api_header_timeout_seconds: float = setting(
        10.0,
        group="service",
        shown="10s",
        doc="A request's headers must arrive within this of the connection "
        "opening or the previous answer, or the connection is closed.",
    )
    api_body_timeout_seconds: float = setting(
        60.0,
        group="service",
        shown="60s",
        doc="A request's body must arrive within this of its first read, "
        "or it answers 408 and the connection is closed.",
    )
    api_keep_alive_seconds: float = setting(
        5.0, group="service", shown="5s", doc="A kept-alive connection with no request is closed after this."
    )
    api_db_wait_seconds: float = setting(
        1.0,
        group="service",
        shown="1s",
        doc="A request of `episodes api` waits this long for a database connection, then answers 503 with Retry-After.",
    )


# Variables no longer read that were no fixed value, and what took their place.
GONE_ELSEWHERE: dict[str, str] = {
    "EPISODES_CRASH_AT": "crash points are armed by the crash tests in the process they kill (jobs.faults)",
    "EPISODES_PRICE_INPUT_PER_MTOK": "prices come from the table of known models (jobs/llm/prices.py)",
    "EPISODES_PRICE_OUTPUT_PER_MTOK": "prices come from the table of known models (jobs/llm/prices.py)",
    "EPISODES_RECALL_CACHE_ROWS": "recall keeps no in-memory copy: it scores in PostgreSQL (jobs.recall.scoring)",
    "EPISODES_RECALL_PACK_ROWS": "recall keeps no packs: it scores in PostgreSQL (jobs.recall.scoring)",
}


def removed_variables() -> dict[str, str]:
    """Each variable no longer read -> what replaced it (a fixed value, a flag, the price table)."""
    removed = dict(GONE_ELSEWHERE)
    for f in fields(FixedValues):
        if f.metadata.get("was"):
            value = f.metadata["shown"] or f.default
            flag = f"; `{f.metadata['flag']}` sets it" if f.metadata["flag"] else ""
            removed[f.metadata["was"]] = f"fixed at {value} (Settings.{f.name}){flag}"
    return removed
