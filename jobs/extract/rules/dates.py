"""Due dates: the date a commitment names, relative to when it was made ("by Friday", "in 2 weeks")."""

from __future__ import annotations

import datetime as dt
import re

from jobs.extract.rules.records import word_list
from jobs.extract.rules.text import NUMBER_WORDS

WEEKDAYS = list(word_list("weekdays"))  # rules/words.toml: Monday first, as datetime's weekday()
MONTHS = list(word_list("months"))  # rules/words.toml: January first
_MONTH_RE = r"(" + "|".join(word_list("month_abbreviations")) + r")[a-z]*\.?"  # "Sept", "sep.", "September"
_DUE_WEEKDAY = re.compile(
    r"\b(?:by|on|before|until|this|next|coming)\s+(?:(?:this|next|the)\s+)?(" + "|".join(WEEKDAYS) + r")\b",
    re.IGNORECASE,
)
_BARE_WEEKDAY = re.compile(r"\b(" + "|".join(WEEKDAYS) + r")\b", re.IGNORECASE)
_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_DAY_MONTH = re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?" + _MONTH_RE + r"(?:,?\s+(\d{4}))?", re.IGNORECASE)
_MONTH_DAY = re.compile(r"\b" + _MONTH_RE + r"\s+(\d{1,2})(?:st|nd|rd|th)?\b(?:,?\s+(\d{4}))?", re.IGNORECASE)
_SMALL_NUM = {"a": 1} | {w: k for k, w in enumerate(NUMBER_WORDS) if 1 <= k <= 7}  # "in a week", "in two days"
_IN_N = re.compile(r"\bin\s+(\d+|" + "|".join(_SMALL_NUM) + r")\s+(day|week)s?\b", re.IGNORECASE)


def _month_number(token: str) -> int:
    prefix = token.lower()[:3]
    return [m[:3] for m in MONTHS].index(prefix) + 1


def _safe_date(year: int, month: int, day: int) -> dt.date | None:
    try:
        return dt.date(year, month, day)
    except ValueError:
        return None


def _future(ref: dt.date, month: int, day: int, year: str | None) -> dt.date | None:
    if year:
        return _safe_date(int(year), month, day)
    candidate = _safe_date(ref.year, month, day)
    if candidate and candidate < ref - dt.timedelta(days=7):
        candidate = _safe_date(ref.year + 1, month, day)
    return candidate


def resolve_due(text: str, ref: dt.date) -> dt.date | None:
    """The date a commitment is due, from phrases like "by Friday", "tomorrow", "on 5 March", "in 2 weeks"."""
    low = text.lower()
    if m := _ISO.search(text):
        return _safe_date(int(m[1]), int(m[2]), int(m[3]))
    if m := _DAY_MONTH.search(text):
        return _future(ref, _month_number(m[2]), int(m[1]), m[3])
    if m := _MONTH_DAY.search(text):
        if m[1].lower() != "may" or re.search(r"\bmay\s+\d", text):  # "may 5" but not "I may 2..." noise
            return _future(ref, _month_number(m[1]), int(m[2]), m[3])
    if re.search(r"\btomorrow\b", low):
        return ref + dt.timedelta(days=1)
    if re.search(r"\b(?:today|tonight|end of (?:the )?day|eod)\b", low):
        return ref
    if re.search(r"\bend of (?:the |this )?week\b", low):
        return ref + dt.timedelta(days=(4 - ref.weekday()) % 7)
    if re.search(r"\bend of (?:the |this )?month\b", low):
        nxt = (ref.replace(day=28) + dt.timedelta(days=4)).replace(day=1)
        return nxt - dt.timedelta(days=1)
    if re.search(r"\bnext week\b", low):
        return ref + dt.timedelta(days=7)
    if m := _IN_N.search(text):
        n = int(m[1]) if m[1].isdigit() else _SMALL_NUM[m[1].lower()]
        return ref + dt.timedelta(days=n * (7 if m[2].lower() == "week" else 1))
    m = _DUE_WEEKDAY.search(text) or _BARE_WEEKDAY.search(text)
    if m:
        target = WEEKDAYS.index(m[1].lower())
        ahead = (target - ref.weekday()) % 7 or 7
        return ref + dt.timedelta(days=ahead)
    return None
