"""Grounding: keep only what the transcript supports.

Every key event must cite message indexes that exist; indexes that do not are removed, and an
event left with none is dropped. Cited messages are kept in order, what someone said before tool
messages (the first is the one quoted with the event). Every entity must occur in the transcript (case-insensitive);
the others are dropped. A resolution must name an offered open item and a decision or preference
that ``replaces`` an earlier one must name an offered current decision or preference, both with
valid evidence; a resolution that does not is dropped, a replacement that does not is unlinked
(the event stays, as a decision that replaces nothing). The counts (dropped events, resolutions
and replacements together) are stored on the episode and shown by `episodes status`.

:func:`ground_entities` is the entity rule on its own; the compress job grounds a period
summary's entities in its request text with it (its events follow a rule of their own).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from jobs.concepts import STANDING_TYPES
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
