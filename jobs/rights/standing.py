"""Corrections stand: re-applying what the user said about a session to its next episode.

Each correction is stored per (tenant, session) in ``episode_corrections`` (migration 0011). When the
session is summarised again, :func:`jobs.summarize.write.write_session_episode` passes the new extraction
through :func:`apply_corrections` before it embeds and writes it, in order of the corrections:

- ``summary``: the corrected summary replaces the model's (the user's word wins; correct it again
  if the session's new content deserves a new summary);
- ``event.text``, ``event.status``, ``event.drop``: applied to the new episode's event of the same
  type whose text is near-identical (:func:`same_text`) to the text the correction was made on;
  corrections are applied in order, so a text correction followed by a drop of the corrected event
  still finds it. An event the model now words differently is a new statement and is kept.

The write checks, under the lock on the session's current episode (which a correction takes too),
that the corrections it applied are still all there are; if one arrived meanwhile it writes again.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

from jobs.models import EpisodeExtraction, KeyEvent

NEAR_IDENTICAL = 0.85  # difflib ratio of the normalised texts


@dataclass(frozen=True)
class Correction:
    id: int
    field: str
    event_type: str | None
    event_text: str | None
    new_value: str | None


@dataclass
class Corrected:
    """An extraction with the session's corrections applied, and the statuses to set after the write."""

    episode: EpisodeExtraction
    statuses: dict[int, str] = field(default_factory=dict)  # event ordinal -> open | done
    applied: tuple[int, ...] = ()  # correction ids that found their target


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().casefold()


def same_text(a: str, b: str) -> bool:
    """Near-identical: equal once whitespace and case are normalised, or a difflib ratio >= 0.85."""
    a, b = _norm(a), _norm(b)
    return a == b or difflib.SequenceMatcher(None, a, b).ratio() >= NEAR_IDENTICAL


def apply_corrections(episode: EpisodeExtraction, corrections: tuple[Correction, ...]) -> Corrected:
    """``episode`` with ``corrections`` applied in order (see the module docstring)."""
    summary = episode.summary
    events: list[tuple[KeyEvent, str | None]] = [(e, None) for e in episode.key_events]
    applied: list[int] = []
    for c in corrections:
        if c.field == "summary":
            if c.new_value:
                summary = c.new_value
                applied.append(c.id)
            continue
        at = _find(events, c)
        if at is None:
            continue
        event, status = events[at]
        if c.field == "event.drop":
            del events[at]
        elif c.field == "event.text" and c.new_value:
            events[at] = (event.model_copy(update={"what": c.new_value}), status)
        elif c.field == "event.status" and c.new_value:
            events[at] = (event, c.new_value)
        applied.append(c.id)
    corrected = episode.model_copy(update={"summary": summary, "key_events": [e for e, _ in events]})
    return Corrected(corrected, {i: s for i, (_, s) in enumerate(events) if s is not None}, tuple(applied))


def _find(events: list[tuple[KeyEvent, str | None]], c: Correction) -> int | None:
    """The best near-identical event of the correction's type, if any."""
    if c.event_text is None:
        return None
    best: tuple[float, int] | None = None
    for at, (event, _) in enumerate(events):
        if event.type == c.event_type and same_text(event.what, c.event_text):
            score = difflib.SequenceMatcher(None, _norm(event.what), _norm(c.event_text)).ratio()
            if best is None or score > best[0]:
                best = (score, at)
    return None if best is None else best[1]
