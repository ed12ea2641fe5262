"""Re-summarising on purpose: requeue chosen sessions for a new episode under the current prompt.

``episodes resummarize`` picks the sessions that have a current session episode, by tenant, user,
end time and prompt version, and puts their transcripts back in the queue (``pending``, due now).
The summarize job (``serve``, ``run``, ``run --batch``) then writes each new episode by the one
path every episode takes (:mod:`jobs.summarize.finish`): the old episode is superseded, what it
resolved is reopened and what it replaced stands again for the new one to resolve or replace, a
pin is inherited, and a compressed session's period is rebuilt by the next compress run (its
super-summary's source hash no longer matches).

Safe beside ``serve``: only summarised (``done``) transcripts are taken, each locked by the UPDATE
that requeues it, so a claim in progress is never touched, and a requeued session is pending, so
running the command twice queues it once. Sessions whose episode already has the current prompt
version are left alone (a claim would complete them without a model call), and so are sessions
whose message bodies retention removed (counted, never an error).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jobs.config import Settings
from jobs.db import Conn, Database, notify_eligible, one
from jobs.errors import ConfigError
from jobs.extract.claude import SYSTEM_TEMPLATE, TOOL_NAME, USER_TEMPLATE
from jobs.extract.claude import prompt_version as claude_prompt_version
from jobs.extract.offline import OfflineExtractor
from jobs.llm.client import cost_usd
from jobs.models import EpisodeExtraction, ModelCall, tool_input_schema
from jobs.prompts import render, source
from jobs.sql import query
from jobs.tokens import estimate_tokens
from jobs.wording import counted

BATCH_SIZE = 1000
LINE_TOKENS = 8  # per message: index, speaker and time (as jobs.extract.claude.split_lines counts)
DEFAULT_OUTPUT_TOKENS = 700  # when no chosen episode was made by Claude (offline ones record 0)


@dataclass(frozen=True)
class Selection:
    """Which sessions: all filters optional; ``since`` / ``until`` bound the session's end (UTC)."""

    tenant: str | None = None
    user: str | None = None
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    prompt_version_below: str | None = None

    def params(self, conn: Conn, current: str) -> dict[str, Any]:
        """The chosen sessions' query parameters; ``prompt_version_below`` becomes the list of versions below it."""
        versions = None
        if self.prompt_version_below is not None:
            below = {"below": self.prompt_version_below}
            versions = one(conn.execute(query("prompt_versions_below"), below))["versions"]
        return {
            "tenant": self.tenant,
            "user": self.user,
            "since": self.since,
            "until": self.until,
            "versions": versions,
            "current": current,
        }


@dataclass
class ResummarizePlan:
    """What a requeue does with the chosen sessions, and what the new episodes would cost with Claude."""

    prompt_version: str
    requeue: int = 0
    already_queued: int = 0
    dead: int = 0
    already_current: int = 0
    messages_gone: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_live_usd: float = 0.0
    cost_batch_usd: float = 0.0
    requeued: int | None = None  # None on a dry run
    priced: bool = True  # False for the offline extractor: it calls no model, so there is nothing to estimate

    def line(self) -> str:
        head = (
            f"would requeue {counted(self.requeue, 'session')}"
            if self.requeued is None
            else f"requeued {counted(self.requeued, 'session')}"
        )
        estimate = (
            f"est. {self.input_tokens:,} input / {self.output_tokens:,} output tokens · est. cost "
            f"${self.cost_live_usd:,.4f} live, ${self.cost_batch_usd:,.4f} with --batch"
            if self.priced
            else "the offline extractor calls no model: no tokens, no cost"
        )
        return (
            f"{head} for prompt {self.prompt_version} · {estimate} · skipped: {self.messages_gone:,} messages gone "
            f"(retention), {self.already_current:,} already on this prompt, {self.already_queued:,} already "
            f"queued, {self.dead:,} dead-lettered (episodes retry)"
        )


def current_prompt_version(settings: Settings, extractor: str | None = None) -> str:
    """The prompt version new episodes get from ``extractor`` (auto: Claude with an API key)."""
    chosen = settings.resolved_extractor if extractor in (None, "auto") else extractor
    if chosen in ("anthropic", "claude-code", "openai"):  # claude-code and openai ask with the Claude path's prompts
        return claude_prompt_version()
    if chosen == "offline":
        return OfflineExtractor.prompt_version
    raise ConfigError(f"unknown extractor {chosen!r}; use auto, anthropic, claude-code, openai or offline.")


def fixed_prompt_tokens() -> int:
    """Estimated tokens of what every extraction request sends besides the transcript: the system
    prompt (with offered items), the forced tool's schema and the user template."""
    system = render(SYSTEM_TEMPLATE, tool_name=TOOL_NAME, open_items=True, decisions=True)
    schema = json.dumps(tool_input_schema(EpisodeExtraction))
    return estimate_tokens(system) + estimate_tokens(schema) + estimate_tokens(source(USER_TEMPLATE))


def plan_resummarize(
    db: Database, selection: Selection, prompt_version: str, *, priced: bool | None = None
) -> ResummarizePlan:
    """Count the chosen sessions by what a requeue does with them, and estimate the cost.

    Input tokens: per session the fixed prompt plus the transcript (characters / 4 and a few tokens a
    message), as plain input (an upper bound: prompt caching makes the fixed part cheaper). Output
    tokens: the mean of what the chosen episodes took when Claude made them, else
    DEFAULT_OUTPUT_TOKENS. Long transcripts that are split and reduced cost somewhat more.
    ``priced`` (default: unless ``prompt_version`` is the offline extractor's, which calls no model):
    whether to estimate at all; without, tokens and cost stay 0 and the line says there are none.
    """
    with db.admin() as conn:
        row = one(conn.execute(query("resummarize_counts"), selection.params(conn, prompt_version)))
    plan = ResummarizePlan(
        prompt_version,
        requeue=int(row["requeue"]),
        already_queued=int(row["queued"]),
        dead=int(row["dead"]),
        already_current=int(row["current"]),
        messages_gone=int(row["gone"]),
        priced=prompt_version != OfflineExtractor.prompt_version if priced is None else priced,
    )
    if not plan.priced:
        return plan
    per_output = round(row["mean_output_tokens"] or DEFAULT_OUTPUT_TOKENS)
    plan.input_tokens = (
        plan.requeue * fixed_prompt_tokens() + (int(row["chars"]) + 3) // 4 + LINE_TOKENS * int(row["messages"])
    )
    plan.output_tokens = plan.requeue * per_output
    for batch in (False, True):
        call = ModelCall(
            template=USER_TEMPLATE,
            prompt_hash="estimate",
            model=db.settings.model,
            batch=batch,
            input_tokens=plan.input_tokens,
            output_tokens=plan.output_tokens,
        )
        if batch:
            plan.cost_batch_usd = cost_usd(db.settings, call)
        else:
            plan.cost_live_usd = cost_usd(db.settings, call)
    return plan


def resummarize(
    db: Database,
    selection: Selection,
    prompt_version: str,
    *,
    batch_size: int = BATCH_SIZE,
    progress: Callable[[int], object] | None = None,
) -> ResummarizePlan:
    """Requeue the chosen sessions (see the module docstring), ``batch_size`` per transaction; returns
    the plan as counted first, with ``requeued`` set to how many were requeued."""
    plan = plan_resummarize(db, selection, prompt_version)
    plan.requeued = 0
    with db.admin() as conn:
        params = selection.params(conn, prompt_version)
        tenants = [r["tenant_id"] for r in conn.execute(query("resummarize_tenants"), params)]
    for tenant_id in tenants:  # batches stay inside one tenant: they lock rows (one shard on a cluster)
        while True:
            with db.admin() as conn:
                n = len(
                    conn.execute(
                        query("resummarize_requeue"), {**params, "tenant_id": tenant_id, "limit": batch_size}
                    ).fetchall()
                )
                if n:
                    notify_eligible(conn)
            if not n:
                break
            plan.requeued += n
            if progress:
                progress(n)
    return plan
