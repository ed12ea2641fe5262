"""Spend: what every back end's model calls cost, recorded the same way, and the daily cap on it.

**Which back end made a call.** A model-call row (and an episode) names it in its ``model``: a bare
model id is the anthropic back end (``claude-haiku-4-5``), any other back end prefixes its name and a
colon (``openai:llama3.2:3b``, ``claude-code:claude-haiku-4-5``): :func:`label` writes that name,
:func:`backend_of` and the SQL of sql/spend.sql read it back.

**Recording.** :func:`record_usage` is the one way a back end fills a call's tokens and cost: the cost
its service reported (the Claude Code CLI's ``total_cost_usd``) when there is one, else the model's
price from the table (:mod:`jobs.llm.prices`) when it is known, else 0 and the price is unknown (a
local model): never another model's price.

**The daily cap.** ``EPISODES_DAILY_TOKEN_CAP`` and ``EPISODES_DAILY_SESSION_CAP`` bound what the
back end in use spends per UTC day (tokens in and out, cache reads and writes included; sessions it
was called for). :class:`DailyCap` reads today's spend from the model-call rows, so every process
sharing the database counts toward one cap; the summarize worker asks it before each claim.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jobs.config import Settings
from jobs.db import Database, one
from jobs.llm.prices import known_price
from jobs.sql import query
from jobs.wording import counted

if TYPE_CHECKING:  # `episodes status` reads the spend without loading pydantic
    from jobs.models import ModelCall

ANTHROPIC = "anthropic"
OPENAI = "openai"


def label(backend: str, model: str) -> str:
    """How a call or an episode names its back end and model: the bare id for anthropic."""
    return model if backend == ANTHROPIC else f"{backend}:{model}"


def backend_of(name: str) -> str:
    """The back end of a model-call row's or an extractor's name (``offline`` makes no model calls)."""
    if name == "offline":
        return "offline"
    return name.split(":", 1)[0] if ":" in name else ANTHROPIC


def model_of(name: str) -> str:
    """The model id in a name written by :func:`label`."""
    return name.split(":", 1)[1] if ":" in name else name


def record_usage(
    call: ModelCall,
    *,
    input_tokens: int,
    output_tokens: int,
    cache_read_tokens: int = 0,
    cache_write_tokens: int = 0,
    cost_usd: float | None = None,
) -> None:
    """Set a call's tokens and its cost: ``cost_usd`` as the service reported it, else priced from the
    table (:func:`estimate_cost`), else 0 (the price is unknown)."""
    call.input_tokens, call.output_tokens = input_tokens, output_tokens
    call.cache_read_tokens, call.cache_write_tokens = cache_read_tokens, cache_write_tokens
    if cost_usd is None:
        cost_usd = (
            estimate_cost(
                call.model, input_tokens + cache_write_tokens, output_tokens, cache_read_tokens, batch=call.batch
            )
            or 0.0
        )
    call.cost_usd = round(cost_usd, 6)


def estimate_cost(
    name: str, input_tokens: int, output_tokens: int, cache_read_tokens: int = 0, *, batch: bool = False
) -> float | None:
    """US dollars at the table's price of the model in ``name`` (any back end), or None when it has
    none (a local model: its cost is unknown, not zero and not another model's)."""
    price = known_price(model_of(name))
    if price is None:
        return None
    total = (input_tokens * price.input + output_tokens * price.output + cache_read_tokens * price.cache_read) / 1e6
    return round(total * (0.5 if batch else 1.0), 6)


def day_start(now: dt.datetime | None = None) -> dt.datetime:
    """The start of the UTC day of ``now`` (default: now): when the daily caps start again."""
    now = now or dt.datetime.now(dt.UTC)
    return now.astimezone(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)


@dataclass(frozen=True)
class Spend:
    """What one back end spent since the start of the day."""

    tokens: int = 0
    sessions: int = 0
    cost_usd: float = 0.0


# What one session in flight is counted at before its calls are recorded: its messages' stored characters / 4,
# plus the prompt around them and the answer (jobs.lifecycle.resummarize prices the fixed prompt at ~1,500
# tokens and an answer at ~500). An estimate on the high side: what it misses is what the cap overshoots.
IN_FLIGHT_FIXED_TOKENS = 2_000


@dataclass(frozen=True)
class InFlight:
    """Sessions being summarised now by any process (but the asker's own), and their estimated tokens."""

    sessions: int = 0
    tokens: int = 0


def spend_today(db: Database, backend: str, now: dt.datetime | None = None) -> Spend:
    """Today's (UTC) spend of ``backend``, from every process's model-call rows."""
    with db.admin() as conn:
        row = one(conn.execute(query("backend_spend_since"), {"backend": backend, "since": day_start(now)}))
    return Spend(int(row["tokens"]), int(row["sessions"]), float(row["usd"]))


@dataclass(frozen=True)
class DailyCap:
    """The day's limits for one back end (None: no limit)."""

    backend: str
    tokens: int | None = None
    sessions: int | None = None

    @classmethod
    def from_settings(cls, settings: Settings, backend: str) -> DailyCap | None:
        """The cap of ``backend`` (EPISODES_DAILY_TOKEN_CAP, EPISODES_DAILY_SESSION_CAP); None when
        neither is set, or for the offline back end (it calls no model and costs nothing)."""
        if backend == "offline" or (settings.daily_token_cap is None and settings.daily_session_cap is None):
            return None
        return cls(backend, settings.daily_token_cap, settings.daily_session_cap)

    def reached(self, spend: Spend, in_flight: int = 0) -> str | None:
        """Why no more sessions may start today, or None. ``in_flight``: sessions claimed and not yet
        recorded (they count toward the session cap)."""
        if self.tokens is not None and spend.tokens >= self.tokens:
            return (
                f"the daily token cap of {self.backend} is reached ({spend.tokens:,} of {self.tokens:,} tokens "
                "today, EPISODES_DAILY_TOKEN_CAP)"
            )
        if self.sessions is not None and spend.sessions + in_flight >= self.sessions:
            taken = spend.sessions + in_flight  # those in progress count: they will have been called today
            return (
                f"the daily session cap of {self.backend} is reached ({counted(taken, 'session')} of "
                f"{self.sessions:,} today, EPISODES_DAILY_SESSION_CAP)"
            )
        return None

    def crowded(self, spend: Spend, others: InFlight) -> str | None:
        """Why a claimed session may not start yet, or None: today's spend and the sessions other workers (any
        process) are summarising now reach a cap, in tokens (theirs estimated) or in sessions (each will have
        been called today). It may start once they are recorded, if room is left. With none in flight a session
        always starts under the cap: the token cap is overshot by at most one session, the session cap never."""
        if others.sessions == 0:
            return None
        if self.tokens is not None and spend.tokens + others.tokens >= self.tokens:
            return (
                f"the daily token cap of {self.backend} would be reached by the sessions in progress "
                f"({spend.tokens:,} tokens spent today and about {others.tokens:,} in "
                f"{counted(others.sessions, 'session')} in progress, of {self.tokens:,}, EPISODES_DAILY_TOKEN_CAP)"
            )
        if self.sessions is not None and spend.sessions + others.sessions >= self.sessions:
            return (
                f"the daily session cap of {self.backend} would be reached by the sessions in progress "
                f"({counted(spend.sessions, 'session')} today and {others.sessions:,} in progress, of "
                f"{self.sessions:,}, EPISODES_DAILY_SESSION_CAP)"
            )
        return None

    def check(self, db: Database, in_flight: int = 0, now: dt.datetime | None = None) -> str | None:
        """:meth:`reached` with today's spend read now."""
        return self.reached(spend_today(db, self.backend, now), in_flight)


class CapGauge:
    """One process's view of a cap between reads of the day's spend (the summarize worker's, asked
    before each claim under one lock).

    Reading the day's spend costs a scan of the day's model calls (bench/spend_cap.py), so it is read
    again only when :data:`REFRESH_SECONDS` have passed, the day has changed, or the sessions this
    process started since the last read could bring the spend near the cap: projected at twice the
    day's mean tokens a session, and sessions counted exactly (those in progress at the read plus
    those started since). Near the cap, every claim reads it: the cap is checked exactly where it
    matters, and the overshoot is what is in progress when it is reached (and what other processes
    start within :data:`REFRESH_SECONDS` while far from it)."""

    REFRESH_SECONDS = 10.0

    def __init__(self, cap: DailyCap, db: Database) -> None:
        self.cap, self.db = cap, db
        self.reads = 0  # how often the day's spend was read (bench/spend_cap.py prints it)
        self._spent: Spend | None = None
        self._read_at = 0.0
        self._day: dt.datetime | None = None
        self._pending = 0  # sessions in progress at the read, plus those started since

    def check(self, in_flight: int) -> str | None:
        """Why no session may start now, or None: then one is counted as started."""
        if self._stale():
            self._spent, self._read_at, self._day = (
                spend_today(self.db, self.cap.backend),
                time.monotonic(),
                day_start(),
            )
            self._pending = in_flight
            self.reads += 1
        assert self._spent is not None
        reason = self.cap.reached(self._spent, self._pending)
        if reason is None:
            self._pending += 1
        return reason

    def unstarted(self) -> None:
        """The session counted by the last :meth:`check` was not started after all (nothing to claim)."""
        self._pending = max(0, self._pending - 1)

    def _stale(self) -> bool:
        spent = self._spent
        if spent is None or time.monotonic() - self._read_at > self.REFRESH_SECONDS or self._day != day_start():
            return True
        if self.cap.sessions is not None and spent.sessions + self._pending + 1 >= self.cap.sessions:
            return True
        if self.cap.tokens is not None:
            if spent.sessions == 0:
                return True  # no measure of a session's tokens yet
            per_session = spent.tokens / spent.sessions
            return spent.tokens + 2 * per_session * (self._pending + 1) >= self.cap.tokens
        return False


def in_flight(db: Database, tenant_id: str, transcript_id: int) -> InFlight:
    """The sessions every process is summarising now, but ``transcript_id`` of ``tenant_id``: their count and
    tokens estimated at :data:`IN_FLIGHT_FIXED_TOKENS` each plus their stored characters / 4. Claims of every
    back end count (a claim does not say which back end took it): the estimate errs on the side of the cap."""
    with db.admin() as conn:
        row = one(conn.execute(query("in_flight_sessions"), {"tenant_id": tenant_id, "id": transcript_id}))
    sessions = int(row["sessions"])
    return InFlight(sessions, sessions * IN_FLIGHT_FIXED_TOKENS + (int(row["chars"]) + 3) // 4)


def spend_and_in_flight(db: Database, backend: str, tenant_id: str, transcript_id: int) -> tuple[Spend, InFlight]:
    """Today's spend of ``backend`` and the sessions in progress but the caller's own; the sessions in progress are
    read first. A session that ends between the two reads is then counted twice (in progress, then spent), never
    missed. Read the other way round, a session recorded just after the spend was read was no longer in progress
    when the claims were read: it counted for nothing, and another session started past the cap (a CI run ended
    a cap of 4,357 tokens at 6,278, more than one session over)."""
    others = in_flight(db, tenant_id, transcript_id)
    return spend_today(db, backend), others


def next_day(now: dt.datetime | None = None) -> dt.datetime:
    """When the caps start again: the next 00:00 UTC."""
    return day_start(now) + dt.timedelta(days=1)
