"""How stored text and timestamps are cleaned on the way in (:mod:`jobs.models` validates with these):
terminal escape sequences and control characters stripped, invalid UTF-8 and NUL refused, a speaker's
name made unable to forge a line, a timestamp made aware and kept between 1990 and tomorrow."""

from __future__ import annotations

import datetime as dt
import re

# Characters a speaker's name loses when it is shown (Message.speaker): no brackets, quotes or colons to
# close its attribute or forge a line's "speaker:" or "[n]".
NOT_IN_NAME = re.compile(r"[()\[\]{}<>:\"`\\]")
MAX_SPEAKER_NAME = 60
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
# Terminal escape sequences, whole (a terminal's colours in pasted or tool output: ESC [ 31 m): removing
# only the ESC left "[31m" in the text, and the offline extractor made a topic tag of it. CSI (also as
# the 8-bit \x9b), OSC (a hyperlink or a title, ended by BEL or ESC \ ), DCS/SOS/PM/APC strings, and
# the short ESC sequences (character sets, keypad modes).
_ESCAPES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"
    r"|\x1b[ -/]*[0-~]"
)
_SURROGATE = re.compile(r"[\ud800-\udfff]")
# Timestamps more than this far in the future are impossible for a finished session.
FUTURE_SKEW = dt.timedelta(days=1)
EARLIEST = dt.datetime(1990, 1, 1, tzinfo=dt.UTC)


def clean_text(value: str, what: str) -> str:
    """``value`` without escape sequences and control characters; invalid UTF-8 or a NUL is a ValueError
    naming ``what``."""
    if _SURROGATE.search(value):
        raise ValueError(f"{what} contains invalid UTF-8")
    if "\x00" in value:
        raise ValueError(f"{what} contains a NUL character")
    # Escape sequences and other control characters are stripped rather than rejected: they carry no
    # meaning here.
    return without_controls(value)


def without_controls(value: str) -> str:
    """A model's text with terminal escape sequences and control characters stripped, as a transcript's are
    (:func:`clean_text`): grounding compares the two, and neither may reach a terminal or a prompt."""
    return _CONTROL.sub("", _ESCAPES.sub("", value))


def shown_name(name: str | None) -> str:
    """A speaker's name as a line shows it: no character that could close its attribute or forge a line."""
    return " ".join(NOT_IN_NAME.sub(" ", name or "").split())[:MAX_SPEAKER_NAME].strip()


def aware(value: dt.datetime | None, what: str) -> dt.datetime | None:
    """``value`` with a time zone (naive is UTC), between :data:`EARLIEST` and tomorrow, else a ValueError."""
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)  # documented: naive timestamps are UTC
    if value < EARLIEST:
        raise ValueError(f"{what} {value.isoformat()} is before {EARLIEST.year}")
    if value > dt.datetime.now(dt.UTC) + FUTURE_SKEW:
        raise ValueError(f"{what} {value.isoformat()} is in the future")
    return value
