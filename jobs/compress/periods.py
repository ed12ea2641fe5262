"""Period arithmetic: which calendar periods qualify, and the identity of a super's source set.

A session episode belongs to the calendar period (year, quarter or month, UTC) that contains its
``ended_at``. A period qualifies once it ended more than ``older_than`` ago: with ``12mo`` on
2026-11-21 the cut-off is 2025-11-21, so years up to 2024 qualify and 2025 does not
(:func:`cutoff_time`, then :func:`period_floor` of the cut-off is the first period that does not).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from jobs.errors import ConfigError

UNITS = {"year": 12, "quarter": 3, "month": 1}  # period length in months
_AGE = re.compile(r"^\s*(\d+)\s*(mo|months?|y|yrs?|years?|w|weeks?|d|days?)\s*$")


def parse_age(text: str) -> tuple[int, int]:
    """``12mo`` / ``2y`` / ``6w`` / ``400d`` -> (months, days)."""
    match = _AGE.match(text.lower())
    if not match:
        raise ConfigError(f"--older-than {text!r} is not an age; use e.g. 12mo, 18mo, 2y, 8w or 400d.")
    n, unit = int(match.group(1)), match.group(2)
    if unit.startswith("mo"):
        return n, 0
    if unit.startswith("y"):
        return 12 * n, 0
    return 0, n * (7 if unit.startswith("w") else 1)


def add_months(day: dt.date, months: int) -> dt.date:
    """``day`` moved by whole calendar months, clamped to the month's last day (Mar 31 - 1 month = Feb 28/29)."""
    year, month0 = divmod(day.year * 12 + day.month - 1 + months, 12)
    following = dt.date(year + (month0 == 11), (month0 + 1) % 12 + 1, 1)
    return dt.date(year, month0 + 1, min(day.day, (following - dt.timedelta(days=1)).day))


def cutoff_time(now: dt.datetime, older_than: str | dt.timedelta) -> dt.datetime:
    """The moment periods must have ended before: ``now`` minus an age (calendar months, then days)."""
    if isinstance(older_than, dt.timedelta):
        return now - older_than
    months, days = parse_age(older_than)
    moved = add_months(now.date(), -months)
    return dt.datetime.combine(moved, now.timetz()) - dt.timedelta(days=days)


def period_floor(moment: dt.datetime, unit: str) -> dt.date:
    """First day of the ``unit`` period (UTC) that contains ``moment``."""
    day = moment.astimezone(dt.UTC).date()
    step = UNITS[unit]
    return dt.date(day.year, (day.month - 1) // step * step + 1, 1)


@dataclass(frozen=True)
class Period:
    """A closed range of days; usually one calendar year, quarter or month."""

    start: dt.date
    end: dt.date  # last day, inclusive

    @classmethod
    def of(cls, unit: str, start: dt.date) -> Period:
        return cls(start, add_months(start, UNITS[unit]) - dt.timedelta(days=1))

    @property
    def start_ts(self) -> dt.datetime:
        return dt.datetime.combine(self.start, dt.time(), dt.UTC)

    @property
    def end_ts(self) -> dt.datetime:
        """Exclusive upper bound: midnight UTC after the last day."""
        return dt.datetime.combine(self.end + dt.timedelta(days=1), dt.time(), dt.UTC)

    @property
    def label(self) -> str:
        s, nxt = self.start, self.end + dt.timedelta(days=1)
        if s.day == 1 and nxt == add_months(s, 12) and s.month == 1:
            return f"{s.year}"
        if s.day == 1 and nxt == add_months(s, 3) and s.month % 3 == 1:
            return f"{s.year}-Q{(s.month - 1) // 3 + 1}"
        if s.day == 1 and nxt == add_months(s, 1):
            return f"{s.year}-{s.month:02d}"
        return f"{s.isoformat()} to {self.end.isoformat()}"

    def contains(self, start: dt.date, end: dt.date) -> bool:
        return self.start <= start and end <= self.end


def sources_hash(ids: Sequence[int]) -> str:
    """Identity of a super's source set; stored as its content_hash."""
    return "src-" + hashlib.sha256(",".join(str(i) for i in sorted(ids)).encode()).hexdigest()[:32]
