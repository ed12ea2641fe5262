"""Months an opening message names, and whether an episode's dates fall in one: a time cue for fitting.

"When did Melanie go camping in July?" names a month, and the session that tells of it is one of
that month or of the month after (people tell of an outing in their next conversation). Neither
the embedding nor the text score knows dates, so :func:`jobs.recall.fitting.select` places the
episodes that fall in a named month first within their group (relevant, then possibly related),
keeping the rank order otherwise. It changes no label and no score: only which of the chosen
episodes get their full summary when the budget cannot hold them all.

A month is named by its English name, capitalised, optionally with a day and a year ("July",
"July 14, 2023", "14 July 2023"); a year after it narrows the cue to that year. "May" opening a
sentence ("May I ask...") is the verb, not the month.

Measured on LoCoMo (a replay of recall's fitting, docs/benchmarks.md; 86 of its 760 questions name a
month): strict all-evidence recall 0.730 -> 0.738 with the reference summaries (offline extractor
0.671 -> 0.676), nothing else lower, no label changed. The rule has no knob to fit.
"""

from __future__ import annotations

import datetime as dt
import re

MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_NAMED = re.compile(
    r"(?P<start>^|[.!?]\s+)?\b(?P<month>"
    + "|".join(MONTHS)
    + r")\b(?:\s+\d{1,2}(?:st|nd|rd|th)?)?(?:,?\s+(?P<year>\d{4})\b)?"
)

Cue = tuple[int, int | None]  # (month 1..12, year or None for any year)


def named_months(message: str) -> frozenset[Cue]:
    """The months ``message`` names, each with the year written after it (or None)."""
    cues = set()
    for match in _NAMED.finditer(message):
        if match["month"] == "May" and match["start"] is not None:
            continue  # "May I ..." at the start of a sentence
        year = match["year"]
        cues.add((MONTHS.index(match["month"]) + 1, int(year) if year else None))
    return frozenset(cues)


def falls_in(start: dt.date, end: dt.date, cues: frozenset[Cue]) -> bool:
    """Whether a month of ``start`` .. ``end`` is a named month or the month after one."""
    if not cues or end < start:
        return False
    year, month = start.year, start.month
    while (year, month) <= (end.year, end.month):
        before = (year, month - 1) if month > 1 else (year - 1, 12)  # a cue's month is the one before this
        if any(
            m == cue_month and cue_year in (None, y) for cue_month, cue_year in cues for y, m in ((year, month), before)
        ):
            return True
        year, month = (year, month + 1) if month < 12 else (year + 1, 1)
    return False
