"""Normalising and splitting text: sentences, words, stopwords, and hints about case and language."""

from __future__ import annotations

import re
from collections.abc import Iterable

from jobs.extract.rules.records import alternation, by_name, word_list

# Words that never make a topic tag on their own: English function words, chat filler, generic verbs
# and adjectives, weekdays and months, company suffixes, and the commonest German/French/Spanish
# function words (so a non-English session does not get "den" or "que" as a topic).
# The calendar's words, each list defined once in rules/words.toml: weekdays, months, their abbreviations, and
# today/tomorrow/yesterday. Stopwords all; never a name (jobs.extract.rules.entities).
CALENDAR_WORDS = frozenset(
    w
    for name in ("weekdays", "months", "weekday_abbreviations", "month_abbreviations", "relative_days")
    for w in word_list(name)
)
STOPWORDS = frozenset(word_list("stopwords")) | CALENDAR_WORDS  # rules/words.toml [stopwords] and the calendar

DIGIT = by_name("specifics")["DIGIT"].compiled  # a number's one sign (jobs/extract/rules/specifics.py)

# Spelled numbers, their position their value: the one definition (rules/words.toml).
NUMBER_WORDS: tuple[str, ...] = word_list("numbers")

_WORD = re.compile(r"[^\W\d_][\w'’-]*", re.UNICODE)
# Never a sentence end. (Company suffixes are not here: "... Acme Ltd. We'll ..." does end a sentence.)
_ABBREV = re.compile(r"(?:\b" + alternation("abbreviations") + r"\.)$")  # rules/words.toml [abbreviations]
_SPLIT = re.compile(r"(?<=[.!?。！？])[\"')\]]*\s+|\n+|(?<=[。！？])")
_CODE = re.compile(r"```.*?```", re.DOTALL)


def normalise(text: str) -> str:
    """Straight quotes and apostrophes, code blocks folded: later rules can assume one spelling."""
    text = text.replace("’", "'").replace("‘", "'").replace("“", '"').replace("”", '"')
    return _CODE.sub(" [code] ", text)


def split_sentences(text: str, max_sentences: int = 40, max_chars: int = 400) -> list[str]:
    """Split one message into sentences. Long messages are capped so work stays bounded."""
    pieces: list[str] = []
    for raw in _SPLIT.split(normalise(text)):
        piece = " ".join(raw.split())
        if not piece:
            continue
        if pieces and _ABBREV.search(pieces[-1]):
            pieces[-1] = f"{pieces[-1]} {piece}"
        else:
            pieces.append(piece)
        if len(pieces) > max_sentences:
            break
    return [clip(p, max_chars) for p in pieces[:max_sentences] if any(ch.isalnum() for ch in p)]


def clip(text: str, limit: int) -> str:
    """Shorten at a word boundary with an ellipsis (model fields have hard length limits)."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0]
    return (cut if len(cut) > limit // 2 else text[: limit - 1]).rstrip(",;:- ") + "…"


def words(text: str) -> list[str]:
    return _WORD.findall(text)


def has_number(text: str) -> bool:
    """A digit anywhere (rules/specifics.toml specific.digit)."""
    return bool(DIGIT.search(text))


def content_words(text: str, exclude: Iterable[str] = ()) -> list[str]:
    """Lowercase words that can carry a topic (no stopwords, no names in ``exclude``)."""
    skip = {w.lower() for w in exclude}
    out = []
    for w in words(text):
        low = w.lower().strip("'-")
        if len(low) < 3 or len(low) > 20 or low in STOPWORDS or low in skip or low.endswith("'s"):
            continue
        out.append(low)
    return out


def shouting(text: str) -> bool:
    """Mostly capital letters: case carries no information (no rewriting, no names from capitals)."""
    letters = [ch for ch in text if ch.isalpha()]
    return len(letters) >= 8 and sum(ch.isupper() for ch in letters) > 0.6 * len(letters)


_ENGLISH_CORE = frozenset(word_list("english_core"))  # rules/words.toml
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")


def looks_english(text: str) -> bool:
    """Enough English function words that capitalisation means names (German capitalises every noun)."""
    tokens = [w.lower() for w in words(text)]
    if len(tokens) < 6:
        return not _CJK.search(text)
    return sum(w in _ENGLISH_CORE for w in tokens) >= 0.2 * len(tokens)


def has_cjk(text: str) -> bool:
    return bool(_CJK.search(text))
