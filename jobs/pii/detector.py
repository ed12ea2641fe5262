"""What every detector shares: the :class:`Finding` it yields and the :class:`Clues` that let it
skip patterns that cannot match.

A detector is a function ``(text, clues) -> Iterator[Finding]`` for one kind of PII
(:mod:`jobs.pii.credentials`, :mod:`jobs.pii.addresses`, :mod:`jobs.pii.payment`,
:mod:`jobs.pii.phones`); :func:`jobs.pii.redaction.find` runs them and resolves overlaps.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple, TypeAlias


@dataclass(frozen=True)
class Finding:
    """One detected span: ``text[start:end]`` is replaced by ``PLACEHOLDER[kind]``."""

    kind: str
    start: int
    end: int


# ------------------------------------------------------------------------------------------------
# Prefilter: cheap facts about a text that prove patterns cannot match it
# ------------------------------------------------------------------------------------------------

_DIGIT = re.compile(r"\d")
_ASCII_DIGITS = b"0123456789"


def contains_any(text: str, needles: Iterable[str]) -> bool:
    """Whether any of ``needles`` occurs in ``text``."""
    for needle in needles:  # a plain loop: about twice as fast as any() over a generator
        if needle in text:
            return True
    return False


def _count_digits(text: str) -> int:
    """How many characters of ``text`` match ``\\d``, as the patterns use it (Unicode digits too)."""
    if text.isascii():  # the only ASCII characters \d matches are 0-9; bytes.translate counts them fast
        return len(text) - len(text.encode("ascii").translate(None, _ASCII_DIGITS))
    return len(_DIGIT.findall(text))


class Clues(NamedTuple):
    """Facts about one text that let detectors skip patterns, computed once per
    :func:`~jobs.pii.redaction.find`.

    Most messages hold no PII, and running every pattern over one costs 50-100 µs. Each
    test below is a necessary condition read off the pattern it guards, so a skipped pattern is one
    that could not have matched, and no finding changes: a pattern that needs n digits (``\\d{2}``,
    thirteen card digits, four IPv4 octets) cannot match a text with fewer, one that needs three
    dots or two colons cannot match a text with fewer, and one that needs a word cannot match a
    text without it (see :meth:`may_contain` and :meth:`may_match`).

    The word tests look at the lower-cased text, and are exact for ASCII text only: ``(?i)`` also
    matches non-ASCII look-alikes that str.lower() does not turn into the ASCII letter (long s 'ſ'
    matches 's', dotted 'İ' matches 'i'), so a non-ASCII text is never ruled out by them.
    """

    lowered: str
    ascii: bool
    digits: int

    @classmethod
    def of(cls, text: str) -> Clues:
        return cls(text.lower(), text.isascii(), _count_digits(text))

    def may_contain(self, words: Iterable[str]) -> bool:
        """False only when a case-insensitive pattern that needs one of ``words`` cannot match."""
        return not self.ascii or contains_any(self.lowered, words)

    def may_match(self, lower_case: re.Pattern[str]) -> bool:
        """False only when a case-insensitive pattern that needs what ``lower_case`` finds (in the
        lower-cased text) cannot match."""
        return not self.ascii or lower_case.search(self.lowered) is not None


Detector: TypeAlias = Callable[[str, Clues], Iterator[Finding]]
