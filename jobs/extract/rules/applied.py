"""What an assistant's reply applied: a reply that acknowledges or reports doing what the user just said, and says
one of its specifics back, makes the user's sentence a decision however it was phrased (issue 36). Used by
:mod:`jobs.extract.offline_events`; the phrasings were chosen on our own amendment sessions
(tests/data/amendments/cases.json) and checked on sde-bench's tuning half."""

from __future__ import annotations

import re

from jobs.extract.rules.records import by_name
from jobs.extract.rules.specifics import DAY, ECHO, NUMBER
from jobs.extract.rules.text import NUMBER_WORDS, split_sentences

# An assistant's reply that reports doing or recording what the user just said ("Done, the list endpoints now cap
# page_size at 100.", "Set concurrency=4 for the thumbnail worker.", "Noted, the pipeline blocks Friday deploys after
# 17:00.", "I'll add a check for feature/<slug> in CI."): with the user's specific echoed (:func:`echoed`), the user's
# sentence was a decision however it was phrased. A reply that objects ("but", "however") applied nothing.
APPLIED = by_name("events")["APPLIED"].compiled  # jobs/extract/rules/events.toml
_OBJECTS = by_name("events")["OBJECTION"].compiled  # "but", "however", "won't": events.toml applied.objection


def applied(reply: str) -> bool:
    """``reply``'s first sentence reports doing or recording something, without objecting (:data:`APPLIED`)."""
    first = next(iter(split_sentences(reply, max_sentences=1)), "")
    return not first.rstrip().endswith("?") and bool(APPLIED.search(first)) and not _OBJECTS.search(first)


_NUMBER_WORDS = {w: str(k) for k, w in enumerate(NUMBER_WORDS)}
_NUMBER_WORD = re.compile(r"\b(?:" + "|".join(_NUMBER_WORDS) + r")\b", re.IGNORECASE)


def specifics(text: str) -> set[str]:
    """The specifics of ``text`` a reply can echo: numbers (spelled ones as digits), code spans, identifiers
    ("feature/<slug>", "concurrency=4" and its 4), acronyms, and days ("the last day", "Friday")."""
    text = _NUMBER_WORD.sub(lambda m: _NUMBER_WORDS[m.group().lower()], text)
    found = {m.group().strip(".:").lower() for m in (*ECHO.finditer(text), *DAY.finditer(text))}
    return found | set(NUMBER.findall(text))


def echoed(sentence: str, reply: str) -> bool:
    """``reply`` repeats one of ``sentence``'s specifics (:func:`specifics`)."""
    return bool(specifics(sentence) & specifics(reply))
