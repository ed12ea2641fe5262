"""Relative dates in a quoted line, resolved against the day it was said.

A line quoted from a session months ago says "yesterday" or "last week"; read today, that points at the
wrong day. Recall therefore follows each such phrase with the calendar date it meant, in brackets:
"I went to the support group yesterday [7 May 2023]", "we shipped it last week [the week before 8 May
2023]". The stored line stays verbatim (episode_lines); only the quote in the block carries the date.

Covered: today / tonight / this morning, yesterday / last night, tomorrow, N days / weeks / months /
years ago, last / next week, last / this / next weekend, last / next month, last / this / next year,
last <weekday>. Anything else is left as it is: a wrong date is worse than none.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable

_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "a couple of": 2,
    "a few": 3,
    "few": 3,
    "several": 3,
}
_COUNT = r"(\d{1,2}|a couple of|a few|an|a|one|two|three|four|five|six|seven|eight|nine|ten|few|several)"


def _day(d: dt.date) -> str:
    return f"{d.day} {d:%B %Y}"


def _month(d: dt.date, months: int) -> dt.date:
    index = d.year * 12 + d.month - 1 + months
    return dt.date(index // 12, index % 12 + 1, 1)


def _ago(d: dt.date, count: str, unit: str) -> str:
    n = int(count) if count.isdigit() else _NUMBERS[count.lower()]
    unit = unit.lower()
    if unit.startswith("day"):
        return _day(d - dt.timedelta(days=n))
    if unit.startswith("week"):
        return f"the week of {_day(d - dt.timedelta(weeks=n))}"
    if unit.startswith("month"):
        return f"{_month(d, -n):%B %Y}"
    return str(d.year - n)


def _last_weekday(d: dt.date, name: str) -> str:
    back = (d.weekday() - _WEEKDAYS.index(name.lower())) % 7 or 7
    return _day(d - dt.timedelta(days=back))


_RULES: list[tuple[re.Pattern[str], Callable[[re.Match[str], dt.date], str]]] = [
    (re.compile(rf"\b{_COUNT} (days?|weeks?|months?|years?) ago\b", re.IGNORECASE), lambda m, d: _ago(d, m[1], m[2])),
    (re.compile(r"\b(?:yesterday|last night)\b", re.IGNORECASE), lambda m, d: _day(d - dt.timedelta(days=1))),
    (re.compile(r"\b(?:today|tonight|this (?:morning|afternoon|evening))\b", re.IGNORECASE), lambda m, d: _day(d)),
    (re.compile(r"\btomorrow\b", re.IGNORECASE), lambda m, d: _day(d + dt.timedelta(days=1))),
    (re.compile(r"\b(?:last|this past) weekend\b", re.IGNORECASE), lambda m, d: f"the weekend before {_day(d)}"),
    (re.compile(r"\b(?:this|next) weekend\b", re.IGNORECASE), lambda m, d: f"the weekend after {_day(d)}"),
    (re.compile(r"\b(?:last|past) week\b", re.IGNORECASE), lambda m, d: f"the week before {_day(d)}"),
    (re.compile(r"\bnext week\b", re.IGNORECASE), lambda m, d: f"the week after {_day(d)}"),
    (re.compile(r"\blast month\b", re.IGNORECASE), lambda m, d: f"{_month(d, -1):%B %Y}"),
    (re.compile(r"\bnext month\b", re.IGNORECASE), lambda m, d: f"{_month(d, 1):%B %Y}"),
    (re.compile(r"\blast year\b", re.IGNORECASE), lambda m, d: str(d.year - 1)),
    (re.compile(r"\bthis year\b", re.IGNORECASE), lambda m, d: str(d.year)),
    (re.compile(r"\bnext year\b", re.IGNORECASE), lambda m, d: str(d.year + 1)),
    (re.compile(r"\blast (" + "|".join(_WEEKDAYS) + r")\b", re.IGNORECASE), lambda m, d: _last_weekday(d, m[1])),
]


# Every phrase of _RULES holds one of these words: a line without any (most lines) is left as it is after one scan,
# not fourteen (a recall resolves the ~140 lines fitting weighs: 6.8 ms of a heavy user's recall before this).
_ANY_RULE = re.compile(r"\b(?:ago|yesterday|last|today|tonight|this|tomorrow|past|next)\b", re.IGNORECASE)


def resolve_relative_dates(text: str, said_on: dt.date | None) -> str:
    """``text`` with each relative date phrase followed by the date it meant on ``said_on`` ("[7 May 2023]");
    unchanged without a day. Each phrase is resolved once, at its first place."""
    if said_on is None or not _ANY_RULE.search(text):
        return text
    return _resolve(text, said_on)


def _resolve(text: str, said_on: dt.date) -> str:
    """What :func:`resolve_relative_dates` does, every rule tried (the tests check the shortcut against it)."""
    taken: list[tuple[int, int, str]] = []
    for pattern, resolve in _RULES:
        for m in pattern.finditer(text):
            if any(start < m.end() and m.start() < end for start, end, _ in taken):
                continue
            taken.append((m.start(), m.end(), resolve(m, said_on)))
    for _start, end, date in sorted(taken, reverse=True):
        text = f"{text[:end]} [{date}]{text[end:]}"
    return text
