"""`episodes run --dry-run`: what the queued sessions would cost with the chosen back end, with no model
called and nothing claimed.

Input tokens: per session the fixed part of the request plus the transcript (characters / 4 and a few
tokens a message), as plain input (an upper bound: prompt caching makes the fixed part cheaper;
:func:`jobs.lifecycle.resummarize.fixed_prompt_tokens` measures it, and the caller passes it in).
Output tokens: the mean of the latest episodes a model made, else a default. The cost is that at the
model's price in the table (:mod:`jobs.llm.prices`); a model without one (a local model) is "unknown
price", never $0 and never another model's. With a daily cap set, the line also says how much of
today's cap is spent and about how many sessions still fit today.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass

from jobs.db import Database, one
from jobs.llm.spend import DailyCap, Spend, backend_of, estimate_cost, model_of, spend_today
from jobs.sql import query
from jobs.wording import counted


@dataclass(frozen=True)
class BacklogEstimate:
    name: str  # the back end and model (jobs.llm.spend.label), "offline" for the offline extractor
    sessions: int
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None  # None: the model has no known price
    cap: DailyCap | None = None
    spent: Spend | None = None  # today's spend of the back end, when a cap is set

    @property
    def backend(self) -> str:
        return backend_of(self.name)

    def fit_today(self) -> int | None:
        """About how many of the sessions the cap lets start today (None: no cap)."""
        if self.cap is None or self.spent is None:
            return None
        fit = self.sessions
        if self.cap.sessions is not None:
            fit = min(fit, max(0, self.cap.sessions - self.spent.sessions))
        if self.cap.tokens is not None and self.sessions:
            left = self.cap.tokens - self.spent.tokens
            per = (self.input_tokens + self.output_tokens) / self.sessions
            fit = min(fit, max(0, math.ceil(left / per)) if per else fit)
        return fit

    def line(self) -> str:
        head = f"dry run, nothing claimed: {counted(self.sessions, 'session')} queued"
        if self.backend == "offline":
            return f"{head} for the offline extractor: no model calls, no cost"
        cost = (
            f"est. cost ${self.cost_usd:,.4f} at {model_of(self.name)}'s list price"
            if self.cost_usd is not None
            else f"cost unknown: no price for {model_of(self.name)} (a local model costs what its machine does)"
        )
        if self.backend == "claude-code" and self.cost_usd is not None:
            cost += " (what the API would charge; a subscription is billed by its plan)"
        parts = [
            f"{head} for {self.name}",
            f"est. {self.input_tokens:,} input / {self.output_tokens:,} output tokens",
            cost,
        ]
        fit = self.fit_today()
        if self.cap is not None and self.spent is not None and fit is not None:
            used = [
                f"{self.spent.tokens:,} of {self.cap.tokens:,} tokens" if self.cap.tokens is not None else "",
                f"{self.spent.sessions:,} of {self.cap.sessions:,} sessions" if self.cap.sessions is not None else "",
            ]
            parts.append(
                f"daily cap: {', '.join(u for u in used if u)} spent today; about {fit:,} fit today, "
                f"{self.sessions - fit:,} would wait for tomorrow"
            )
        return " · ".join(parts)


def estimate_backlog(
    db: Database,
    name: str,
    *,
    fixed_tokens: int,
    line_tokens: int,
    default_output_tokens: int,
    tenant: str | None = None,
    since: dt.datetime | None = None,
    limit: int | None = None,
) -> BacklogEstimate:
    """Price the queued sessions (as `episodes run` with these filters would take them) for the back
    end and model ``name`` (an extractor's name: jobs.llm.spend.label)."""
    with db.admin() as conn:
        row = one(conn.execute(query("backlog_size"), {"tenant": tenant, "since": since}))
        mean = one(conn.execute(query("recent_output_tokens")))["mean"]
    sessions, chars, messages = int(row["sessions"]), int(row["chars"]), int(row["messages"])
    if limit is not None and sessions > limit:  # the first `limit` sessions: scale by their share
        chars, messages, sessions = chars * limit // sessions, messages * limit // sessions, limit
    cap = DailyCap.from_settings(db.settings, backend_of(name))
    spent = spend_today(db, cap.backend) if cap is not None else None
    if backend_of(name) == "offline":
        return BacklogEstimate(name, sessions, cap=cap, spent=spent)
    input_tokens = sessions * fixed_tokens + (chars + 3) // 4 + line_tokens * messages
    output_tokens = sessions * round(mean or default_output_tokens)
    return BacklogEstimate(
        name, sessions, input_tokens, output_tokens, estimate_cost(name, input_tokens, output_tokens), cap, spent
    )
