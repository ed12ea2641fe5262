"""Grounding: keep only what the transcript supports.

Every key event must cite message indexes that exist; indexes that do not are removed, and an
event left with none is dropped. Cited messages are kept in order, what someone said before tool
messages (the first is the one quoted with the event). Every entity must occur in the transcript (case-insensitive);
the others are dropped. A resolution must name an offered open item and a decision or preference
that ``replaces`` an earlier one must name an offered current decision or preference, both with
valid evidence; a resolution that does not is dropped, a replacement that does not is unlinked
(the event stays, as a decision that replaces nothing). The counts (dropped events, resolutions
and replacements together) are stored on the episode and shown by `episodes status`.

:func:`ground_summary` grounds a model's summary (issue 46 #15): a sentence naming a thing the transcript
does not (a capitalised name inside the sentence, a number, an identifier) is dropped; the summarize job
fails the attempt when no sentence is left, so an invented answer is never stored.

:func:`ground_entities` is the entity rule on its own; the compress job grounds a period
summary's entities in its request text with it (its events follow a rule of their own).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from dataclasses import dataclass

from jobs.concepts import STANDING_TYPES
from jobs.extract.rules.records import word_list
from jobs.extract.rules.specifics import SUMMARY_NAME
from jobs.models import Entity, EpisodeExtraction, Message


@dataclass(frozen=True)
class Grounded:
    episode: EpisodeExtraction
    dropped_events: int
    dropped_entities: int


def ground(
    episode: EpisodeExtraction,
    messages: list[Message],
    offered_items: set[int] | None = None,
    offered_decisions: set[int] | None = None,
) -> Grounded:
    """Drop what the transcript does not support. Resolutions must name an offered open item;
    replacements an offered decision or preference, each replaced by at most one event."""
    count = len(messages)
    kept_events = []
    unlinked = 0
    replaced: set[int] = set()
    for event in episode.key_events:
        # What was said comes first: the first message cited is the event's time and its stored quote,
        # and tool output (context) is never quoted as what the user or the assistant said.
        evidence = sorted({i for i in event.evidence if 0 <= i < count}, key=lambda i: (messages[i].role == "tool", i))
        if not evidence:
            continue
        replaces = event.replaces
        if replaces is not None and (
            event.type not in STANDING_TYPES or replaces in replaced or replaces not in (offered_decisions or set())
        ):
            replaces, unlinked = None, unlinked + 1
        if replaces is not None:
            replaced.add(replaces)
        kept_events.append(event.model_copy(update={"evidence": evidence, "replaces": replaces}))
    kept_entities, ungrounded = ground_entities(
        episode.entities, "\n".join(f"{m.name or ''}\n{m.content}" for m in messages)
    )
    resolutions = []
    for res in episode.resolved_items:
        evidence = sorted({i for i in res.evidence if 0 <= i < count})
        if evidence and res.item_id in (offered_items or set()):
            resolutions.append(res.model_copy(update={"evidence": evidence}))
    dropped = len(episode.key_events) - len(kept_events) + len(episode.resolved_items) - len(resolutions) + unlinked
    cleaned = episode.model_copy(
        update={"key_events": kept_events, "entities": kept_entities, "resolved_items": resolutions}
    )
    return Grounded(cleaned, dropped_events=dropped, dropped_entities=ungrounded)


def ground_entities(entities: Iterable[Entity], text: str) -> tuple[list[Entity], int]:
    """The entities whose name occurs in ``text`` (case-insensitive), names stripped, each (name,
    kind) once; and how many were dropped for not occurring (duplicates are merged, not counted)."""
    haystack = text.casefold()
    kept: list[Entity] = []
    ungrounded = 0
    seen: set[tuple[str, str]] = set()
    for entity in entities:
        key = (entity.name.strip().casefold(), entity.kind)
        if not key[0] or key[0] not in haystack:
            ungrounded += 1
        elif key not in seen:
            seen.add(key)
            kept.append(entity.model_copy(update={"name": entity.name.strip()}))
    return kept, ungrounded


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")
# What a sentence names: a capitalised word (not the sentence's first, unless it is CamelCase or holds a
# digit), a number, an identifier (snake_case, dotted, slashed) or a backticked value: a specific
# (rules/specifics.toml specific.summary_name).
_NAMED = SUMMARY_NAME
_CAMEL = re.compile(r"[a-z][A-Z]|\d")
# Capitalised words any summary may use: how it names the speakers, days and months, articles.
_ANY_SUMMARY = frozenset(w for name in ("summary_words", "weekdays", "months") for w in word_list(name))


def ground_summary(summary: str, messages: list[Message], dates: Iterable[dt.datetime | None] = ()) -> tuple[str, int]:
    """``summary`` without its sentences that name something the transcript does not, and how many were
    dropped. A name, number or identifier must occur in the messages or their speakers' names
    (case-insensitive); the day and year of ``dates`` (the session's) may be written too."""
    haystack = "\n".join(f"{m.name or ''}\n{m.content}" for m in messages).casefold()
    allowed = {str(v) for d in dates if d is not None for v in (d.day, d.year)}
    kept: list[str] = []
    dropped = 0
    for sentence in _SENTENCE_END.split(summary.strip()):
        if all(_grounded(name, haystack, allowed) for name in _names(sentence)):
            kept.append(sentence)
        else:
            dropped += 1
    return " ".join(kept), dropped


def ungrounded_names(summary: str, messages: list[Message], dates: Iterable[dt.datetime | None] = ()) -> list[str]:
    """The names, numbers and identifiers of ``summary`` that the transcript does not hold (for the error)."""
    haystack = "\n".join(f"{m.name or ''}\n{m.content}" for m in messages).casefold()
    allowed = {str(v) for d in dates if d is not None for v in (d.day, d.year)}
    return list(dict.fromkeys(n for n in _names(summary) if not _grounded(n, haystack, allowed)))


def _names(sentence: str) -> list[str]:
    out: list[str] = []
    for match in _NAMED.finditer(sentence):
        quoted, ident, number, word = match.groups()
        if word is not None:
            first = not sentence[: match.start()].strip(" \"'“”‘’([")
            if word.casefold() in _ANY_SUMMARY or (first and not _CAMEL.search(word)):
                continue
        out.append((quoted or ident or number or word or "").strip())
    return [n for n in out if n]


def _grounded(name: str, haystack: str, allowed: set[str]) -> bool:
    if name in allowed:
        return True
    if name[:1].isdigit():  # a number as a whole: 9 is not grounded by $49
        return re.search(rf"(?<![\d.,]){re.escape(name)}(?![\d]|[.,]\d)", haystack) is not None
    key = name.casefold()
    return key in haystack or key.removesuffix("'s").removesuffix("’s") in haystack
