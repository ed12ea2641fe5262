"""What the hooks print: the recall block at session start, and at the first prompt only what is new.

SessionStart injects the whole block (recent episodes, open items, sessions not yet summarised)
and remembers which episodes and open items it showed (:mod:`jobs.claude_code.session_state`).
The first UserPromptSubmit recalls with the prompt and prints a block of the episodes recall found
relevant (or possibly related) and the open items that SessionStart did not show; nothing if there
are none. Both render through ``prompts/previous_episodes.j2`` (jobs.recall.result), so stored text
is quoted as data in either.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from jobs.claude_code.session_state import SessionState, remember_start
from jobs.concepts import DEFAULT_BUDGET_TOKENS
from jobs.recall.result import RecalledEpisode, RecalledOpenItem, RecalledSession, render_block

START_BUDGET_TOKENS = DEFAULT_BUDGET_TOKENS  # the SessionStart block
PROMPT_BUDGET_TOKENS = 800  # what the first prompt adds


def has_lines(episodes: Sequence[Any], open_items: Sequence[Any], sessions: Sequence[Any]) -> bool:
    return bool(episodes or open_items or sessions)


def new_for_prompt(
    state: SessionState, episodes: Sequence[RecalledEpisode], open_items: Sequence[RecalledOpenItem]
) -> tuple[list[RecalledEpisode], list[RecalledOpenItem]]:
    """The relevant episodes and the open items of a prompt's recall that were not injected yet."""
    shown_episodes, shown_items = set(state.episodes), set(state.open_items)
    fresh = [
        ep
        for ep in episodes
        if ep.id not in shown_episodes and (ep.relevance_rank is not None or ep.related_rank is not None)
    ]
    items = [item for item in open_items if item.id not in shown_items]
    return fresh, items


def prompt_block(
    state: SessionState, now: dt.datetime, episodes: Sequence[RecalledEpisode], open_items: Sequence[RecalledOpenItem]
) -> str:
    """The first prompt's block ("" when recall found nothing new), recording what it shows."""
    fresh, items = new_for_prompt(state, episodes, open_items)
    if not fresh and not items:
        return ""
    remember_start(state, [ep.id for ep in fresh], [item.id for item in items])
    return render_block(now, fresh, items)


# --- the API's JSON back into the recall types (remote mode) ------------------------------------


def _fields(cls: type, raw: Mapping[str, Any], times: Sequence[str], dates: Sequence[str] = ()) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(cls)}
    out = {k: v for k, v in raw.items() if k in names}
    for key in times:
        if isinstance(out.get(key), str):
            out[key] = dt.datetime.fromisoformat(out[key])
    for key in dates:
        if isinstance(out.get(key), str):
            out[key] = dt.date.fromisoformat(out[key])
    return out


def episodes_from(raw: Sequence[Mapping[str, Any]]) -> list[RecalledEpisode]:
    return [
        RecalledEpisode(**_fields(RecalledEpisode, r, ("started_at", "ended_at"), ("period_start", "period_end")))
        for r in raw
    ]


def open_items_from(raw: Sequence[Mapping[str, Any]]) -> list[RecalledOpenItem]:
    return [RecalledOpenItem(**_fields(RecalledOpenItem, r, ("occurred_at",), ("due",))) for r in raw]


def sessions_from(raw: Sequence[Mapping[str, Any]]) -> list[RecalledSession]:
    return [RecalledSession(**_fields(RecalledSession, r, ("started_at", "ended_at"))) for r in raw]
