"""Event cues: the phrases that make a sentence a decision, a preference, a commitment or a surprise, and the chat
patterns (pleasantries, small talk, praise, hedges, "not sure" replies) that make it none.

The patterns are data (issue 48): one record per rule in ``rules/cues.toml``, each with its source, examples and
negative neighbours (:mod:`jobs.extract.rules.records`). This module is the engine that applies them, in stages:
:func:`candidates` (every cue rule that fires, with its conditions met) -> :func:`surviving` (vetoes, applied once)
-> :func:`cue` (the first by priority). Attribution, agreement and rendering follow in
:mod:`jobs.extract.offline_events`.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal, cast

from jobs.extract.rules.dates import resolve_due
from jobs.extract.rules.records import by_name, load
from jobs.extract.rules.specifics import SPECIFIC, TECHNICAL  # composed from rules/specifics.toml
from jobs.extract.rules.text import content_words, normalise

# The event types a cue can suggest; an open question is found from the dialogue, not from a cue.
CueType = Literal["decision", "preference", "commitment", "surprise", "fact"]
CUE_TYPES: frozenset[str] = frozenset(("decision", "preference", "commitment", "surprise", "fact"))

_RECORDS = by_name("cues")
PLEASANTRY = _RECORDS["PLEASANTRY"].compiled
DECISION_LABEL = _RECORDS["DECISION_LABEL"].compiled  # "Decision: ...", "Settled: ...", "Amended rule, ...: ..."
STRONG_DECISION = _RECORDS["STRONG_DECISION"].compiled
RULE = _RECORDS["RULE"].compiled  # a standing rule: "Going forward, ...", "The rule is ..."
STATED_RULE = _RECORDS["STATED_RULE"].compiled  # "Retries must stop after 4 attempts"
FACT = _RECORDS["FACT"].compiled  # "we're on Django 4.2", "the API runs on port 8080"
WEAK_DECISION = _RECORDS["WEAK_DECISION"].compiled
PREFERENCE = _RECORDS["PREFERENCE"].compiled
COMMITMENT = _RECORDS["COMMITMENT"].compiled
SURPRISE = _RECORDS["SURPRISE"].compiled
ACTION_VERBS = _RECORDS["ACTION_VERBS"].compiled
WOW = _RECORDS["WOW"].compiled
HEDGE = _RECORDS["HEDGE"].compiled
UNANSWERED = _RECORDS["UNANSWERED"].compiled
SMALL_TALK_QUESTION = _RECORDS["SMALL_TALK_QUESTION"].compiled
GENERIC_PRAISE = _RECORDS["GENERIC_PRAISE"].compiled
PROPOSAL = _RECORDS["PROPOSAL"].compiled  # an assistant proposing or restating a rule ("Got it: ...")
OFFER = _RECORDS["OFFER"].compiled  # an assistant asking whether to make a change
SUGGESTION = _RECORDS["SUGGESTION"].compiled  # the part of PROPOSAL that offers rather than restates
CHOICE_QUESTION = _RECORDS["CHOICE_QUESTION"].compiled  # an assistant asking the user to choose
AGREEMENT = _RECORDS["AGREEMENT"].compiled  # a reply that agrees ("Yes", "Agreed.", "Sounds good, ship it")
REFERS_BACK = _RECORDS["REFERS_BACK"].compiled  # "That's the rule going forward, yes."
SECOND_PERSON = _RECORDS["SECOND_PERSON"].compiled

# A veto is checked once, after detection, for every cue that lists it: a hedge ("Not sure, maybe we will switch to
# Kafka"), a condition ("If the load doubles we'll go with Kafka") or a question makes a cue no event.
VETOES: dict[str, Callable[[str], bool]] = {
    "question": lambda text: text.rstrip().endswith("?"),
    "hedge": lambda text: bool(HEDGE.search(text)),
    "praise": lambda text: bool(GENERIC_PRAISE.search(text)),
    "second_person": lambda text: bool(SECOND_PERSON.search(text)),  # "wow, you ..." is praise for the other
}


@dataclass(frozen=True)
class Candidate:
    """A cue rule that fired on a sentence: its rule, the type it suggests and where its cue starts."""

    rule: str
    type: CueType
    start: int
    vetoes: tuple[str, ...]


@dataclass(frozen=True)
class CueRule:
    id: str
    type: CueType
    pattern: re.Pattern[str]
    min_substance: int = 0
    requires: tuple[str, ...] = ()
    vetoes: tuple[str, ...] = ("question", "hedge")
    anchored: bool = False  # matched at the start of the sentence (a label), else searched


# Cue rules by priority: the first that survives its vetoes decides the sentence's type.
CUE_RULES: tuple[CueRule, ...] = tuple(
    CueRule(r.id, cast(CueType, r.type), r.compiled, r.min_substance, r.requires, r.vetoes, r.anchored)
    for r in sorted(load("cues"), key=lambda r: r.priority)
    if r.type in CUE_TYPES
)


def _requirements_hold(rule: CueRule, text: str, m: re.Match[str], substance: int) -> bool:
    """The conditions a rule sets on the rest of its sentence (beyond its own pattern)."""
    checks: dict[str, Callable[[], bool]] = {
        "technical": lambda: bool(TECHNICAL.search(text)),
        "substance_or_action": lambda: substance >= 2 or bool(ACTION_VERBS.search(text[m.start() :])),
        "near_start": lambda: m.start() <= 60,
        "specific_after": lambda: bool(SPECIFIC.search(text, m.end() - 1)),
        "due_action_is_commitment": lambda: True,
    }
    return substance >= rule.min_substance and all(checks[name]() for name in rule.requires)


def candidates(text: str, names: Iterable[str] = ()) -> list[Candidate]:
    """Stage 1: every cue rule that fires on ``text`` (normalised) with its conditions met, by priority."""
    substance = len(content_words(text, exclude=names))  # "Jon, I'm gonna make it!" has none
    out: list[Candidate] = []
    for rule in CUE_RULES:
        m = rule.pattern.match(text) if rule.anchored else rule.pattern.search(text)
        if m is None or not _requirements_hold(rule, text, m, substance):
            continue
        kind = rule.type
        if "due_action_is_commitment" in rule.requires:  # "let's send it by Friday" is a commitment
            due_like = resolve_due(text, dt.date(2000, 1, 3)) is not None
            kind = "commitment" if due_like and ACTION_VERBS.search(text) else kind
        out.append(Candidate(rule.id, kind, 0 if rule.anchored else m.start(), rule.vetoes))
    return out


def vetoed(text: str, vetoes: Iterable[str] = ("question", "hedge")) -> bool:
    """One of ``vetoes`` strikes ``text`` (normalised): for the stages after the cues (an agreeing reply)."""
    return any(VETOES[name](text) for name in vetoes)


def surviving(found: list[Candidate], text: str) -> list[Candidate]:
    """Stage 2: the candidates that none of their vetoes strikes, each veto checked once per sentence."""
    struck = {name for name in {v for c in found for v in c.vetoes} if VETOES[name](text)}
    return [c for c in found if not struck.intersection(c.vetoes)]


def cue(sentence: str, names: Iterable[str] = ()) -> tuple[CueType, int] | None:
    """The event type a sentence's cue words suggest and where the cue starts (questions are separate).

    Cues need some substance around them: "I'll keep you posted" or "let's do this!" are chat, not events.
    """
    text = normalise(sentence)
    kept = surviving(candidates(text, names), text)
    return (kept[0].type, kept[0].start) if kept else None


def clause_from(sentence: str, start: int) -> str:
    """The clause a cue starts: from the cue to the next clause break. "Maria, I'm so excited to tell you
    I joined a gym - it's great!" -> "I joined a gym". Used only when it reads as a sentence on its own."""
    rest = normalise(sentence)[start:]
    cut = re.search(r"\s[-–—]\s|[;:!?]|\.(?:\s|$)|,\s(?:but|so|and then|which|because)\b", rest)
    return rest[: cut.start()].strip() if cut else rest.strip()
