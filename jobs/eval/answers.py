"""Answer coverage: does a recall block hold the words of a question's reference answer?

A reference answer's *content words* are its words lowercased, split at anything that is not a
letter or digit, with English stopwords dropped ("by dancing" -> {"dancing"}). A block *covers* the
answer when every content word is a word of the block. It is a proxy for "the agent could answer
from the block": it ignores paraphrase (an answer's "19 January, 2023" is not covered by a block's
"2023-01-19"), so it is a lower bound, comparable between runs rather than absolute.
"""

from __future__ import annotations

import re

_NON_WORD = re.compile(r"[\W_]+")

# A short English stopword list (function words, auxiliaries, pronouns); content words are the rest.
STOPWORDS = frozenset(
    """
a about above after again against all am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has have
having he her here hers herself him himself his how i if in into is it its itself just me more most
my myself no nor not now of off on once only or other our ours ourselves out over own same she should
so some such than that the their theirs them themselves then there these they this those through to
too under until up very was we were what when where which while who whom why will with would you your
yours yourself yourselves also s t d ll m re ve
""".split()
)


def words(text: str) -> list[str]:
    """The lowercased words of ``text`` (runs of letters and digits)."""
    return [w for w in _NON_WORD.split(text.lower()) if w]


def content_words(text: str) -> frozenset[str]:
    """The words of ``text`` that are not stopwords."""
    return frozenset(w for w in words(text) if w not in STOPWORDS)


def covers(block: str, answer_words: frozenset[str]) -> bool:
    """True when every content word of the answer is a word of the block (and there is at least one)."""
    return bool(answer_words) and answer_words <= set(words(block))
