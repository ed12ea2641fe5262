"""Compact lines: the sentence of a summary that best matches the opening message's rarer words."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from jobs.recall.result import RecalledEpisode

# Compact lines show the summary's sentence that best matches the opening message.
_NON_WORD = re.compile(r"[\W_]+")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def terms(text: str) -> set[str]:
    """Words of 3+ letters cut to 6 (a crude stem); common words are discounted by term_weights."""
    return {w[:6] for w in _words(text).split() if len(w) >= 3}


def term_weights(terms: set[str], episodes: Sequence[RecalledEpisode]) -> dict[str, float]:
    """Inverse document frequency of the query's words among the offered episodes.

    A word in every summary (the user's own name, say) should not decide which sentence is shown.
    """
    texts = [_words(ep.summary) for ep in episodes]
    return {t: math.log(1 + len(texts) / (1 + sum(" " + t in text for text in texts))) for t in terms}


def holds_any(text: str, stems: set[str]) -> bool:
    """Whether a word of ``text`` starts with one of ``stems`` (the stems of :func:`terms`)."""
    words = _words(text)
    return any(" " + t in words for t in stems)


def _words(text: str) -> str:
    """' word word ... ': lets `" " + stem in _words(text)` test for a word starting with stem."""
    return " " + _NON_WORD.sub(" ", text.lower()) + " "


def snippet(ep: RecalledEpisode, weights: dict[str, float], limit: int) -> str:
    """A compact line: the summary's sentence that best matches the opening message's rarer words."""
    if limit < 12:  # no room for a sentence (a header_chars of 0): the header is the day and the labels alone
        return ""
    sentences = [s.strip() for s in _SENTENCE.split(ep.summary.strip()) if s.strip()] or [ep.summary.strip()]
    best, best_score = 0, 0.0
    if weights and len(sentences) > 1:
        for i, sentence in enumerate(sentences):
            words = _words(sentence)
            score = sum(w for t, w in weights.items() if " " + t in words)
            if score > best_score:
                best, best_score = i, score
    text = sentences[best]
    if ep.topic_tags:
        text = f"{', '.join(ep.topic_tags[:3])}: {text}"
    if len(text) > limit:
        text = text[: limit - 3].rsplit(" ", 1)[0].rstrip(" ,;:") + "..."
    return text
