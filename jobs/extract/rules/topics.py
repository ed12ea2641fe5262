"""Which key phrases can be topics: noun phrases naming the subject (the component, the library, the feature),
never a verb or a generic word.

A coding session says "add", "update", "read", "tests", "task", "write", "fix" and "file" more than anything
else, and tags made of them say nothing (issue 36 found sessions tagged ``update, add, read, tests, task``).
Two rules, no tagger:

- **Stop lists**: :data:`GENERIC` (work verbs, generic nouns of software work and of chat, number words): a
  phrase made only of such words is never a topic; :data:`WORK_VERBS` never start or end one ("update config"
  and "config update" both give way to "config"), while a generic noun may end one ("migration plan").
- **Verbs of this transcript** (:func:`verbs_in`): a word the transcript uses as a verb -- after "let's",
  "I'll", "can you", "please", before an object ("catches it") or opening an imperative sentence before an
  article ("Write the plan") -- and
  never after an article or possessive ("the write") is a verb here, so it neither starts nor ends a topic.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from jobs.extract.rules.records import alternation, word_list
from jobs.extract.rules.text import NUMBER_WORDS, normalise

# Work verbs: never a topic, never the first or last word of one ("update config" gives way to "config").
WORK_VERBS = frozenset(word_list("work_verbs"))  # rules/words.toml [work_verbs]
# Generic words: a topic never consists of these alone ("tests", "task", "file", "plan"), though one may name a
# kind of thing inside a topic ("migration plan", "config file").
GENERIC = WORK_VERBS | frozenset(word_list("generic_words")) | frozenset(NUMBER_WORDS[1:13])  # one to twelve
_DETERMINER = alternation("determiners")  # rules/words.toml [determiners]
_AS_VERB = re.compile(
    r"\b(?:let's|let me|i'll|we'll|you'll|i will|we will|please|can you|could you|would you|will you|should|"
    r"must|don't|didn't|doesn't)\s+([a-z][a-z'-]+)\b",
    re.IGNORECASE,
)
_IMPERATIVE_START = re.compile(r"(?:^|[.!?]\s+|\n)\s*([A-Za-z][a-z'-]+)\s+" + _DETERMINER + r"\b")
_BEFORE_OBJECT = re.compile(r"\b([a-z][a-z'-]+)\s+(?:it|them|him|her|me|us|" + _DETERMINER[3:] + r"\b")
_AS_NOUN = re.compile(r"\b" + _DETERMINER + r"\s+([a-z][a-z'-]+)\b(?:\s+([a-z][a-z'-]+)\b)?", re.IGNORECASE)


def verbs_in(texts: Iterable[str]) -> frozenset[str]:
    """Lowercase words ``texts`` use as verbs and never as nouns (see the module docstring)."""
    verbs: set[str] = set()
    nouns: set[str] = set()
    for raw in texts:
        text = normalise(raw)
        verbs.update(m.group(1).lower() for m in _AS_VERB.finditer(text))
        verbs.update(m.group(1).lower() for m in _IMPERATIVE_START.finditer(text))
        verbs.update(
            m.group(1)
            for m in _BEFORE_OBJECT.finditer(text)  # "outer web catches it"
            if not m.group(1).endswith("ing")
        )  # "painting a mural": the hobby is still a topic
        nouns.update(w.lower() for m in _AS_NOUN.finditer(text) for w in m.groups() if w)  # "the (deploy) job"
    return frozenset(verbs - nouns)


def is_topic(phrase: str, verbs: frozenset[str] = frozenset()) -> bool:
    """Can ``phrase`` (lowercase words) be a topic: not all generic, neither starting nor ending with a work verb
    or one of this transcript's ``verbs``."""
    parts = phrase.split()
    if not parts or all(p in GENERIC for p in parts):
        return False
    return not any(edge in WORK_VERBS or edge in verbs for edge in (parts[0], parts[-1]))


def determined_phrases(texts: Iterable[str]) -> frozenset[str]:
    """Two- and three-word phrases that follow an article or possessive somewhere in ``texts`` ("the billing
    service", "our migration plan"): noun compounds, topics even when said once."""
    out: set[str] = set()
    for raw in texts:
        for m in _DETERMINED.finditer(normalise(raw).lower()):
            words = m.group(1).split()
            out.update(" ".join(words[:n]) for n in (2, 3) if len(words) >= n)
    return frozenset(out)


_DETERMINED = re.compile(r"\b" + _DETERMINER + r"\s+([a-z][\w'-]*(?:\s+[a-z][\w'-]*){1,2})")
