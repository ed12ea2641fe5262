"""What the buttons of the memory page do: the same functions as ``PATCH``/``DELETE /v1/episodes/{id}``
(:func:`jobs.rights.correct.correct_episode`, :func:`jobs.rights.erase_episode.forget_episode`), for the link's user only.

Each returns the HTTP status and a :class:`~jobs.service.page_view.Notice` in plain words. An id
that is not one of the link's user's current episodes (or open items) is "not here": another user's
or another tenant's id reads exactly like one already forgotten, and nothing is changed.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from jobs.db import Database
from jobs.errors import CorrectionInvalid, EpisodeNotFound, SuperSummaryNotErasable
from jobs.rights.correct import correct_episode, correction_from
from jobs.rights.erase_episode import forget_episode
from jobs.service.page_link import MemoryLink
from jobs.service.page_view import Notice, describe
from jobs.sql import query

log = logging.getLogger("jobs.service.page")

ItemAction = Literal["done", "correct", "forget"]
GONE = Notice("That is no longer here: it may already have been forgotten. Nothing was changed.", ok=False)
UNCONFIRMED = Notice(
    "Nothing was forgotten: tick the box that says you understand it cannot be undone, then press the button again.",
    ok=False,
)


def _owned(db: Database, link: MemoryLink, name: str, row_id: int) -> dict[str, Any] | None:
    with db.tenant(link.tenant_id) as conn:
        row = conn.execute(query(name), {"tenant_id": link.tenant_id, "id": row_id}).fetchone()
    return dict(row) if row is not None and row["user_id"] == link.user_id else None


def _actor(link: MemoryLink) -> str:
    return f"user:{link.user_id}"[:200]


def forget(db: Database, link: MemoryLink, episode_id: int, confirmed: bool) -> tuple[int, Notice]:
    """Forget one conversation of the link's user (a summary of a period is not forgotten by itself)."""
    episode = _owned(db, link, "page_episode_owner", episode_id)
    if episode is None:
        return 404, GONE
    if not confirmed:
        return 422, UNCONFIRMED
    what = describe(episode)
    try:
        forget_episode(db, link.tenant_id, episode_id)
    except EpisodeNotFound:
        return 404, GONE
    except SuperSummaryNotErasable:
        return 409, Notice(
            f"{what[0].upper()}{what[1:]} is made from several conversations and cannot be "
            "forgotten by itself: forget those conversations and it is rewritten without them.",
            ok=False,
        )
    log.info(
        "memory page: episode forgotten",
        extra={"action": "page_forget", "tenant": link.tenant_id, "episode_id": episode_id},
    )
    return 200, Notice(f"Forgotten: {what}. It is gone from this page and from what the assistant remembers about you.")


def correct(db: Database, link: MemoryLink, episode_id: int, summary: str) -> tuple[int, Notice]:
    """Replace the summary of one of the link's user's episodes with the user's own words."""
    episode = _owned(db, link, "page_episode_owner", episode_id)
    if episode is None:
        return 404, GONE
    what = describe(episode)
    try:
        report = correct_episode(
            db, link.tenant_id, episode_id, correction_from({"summary": summary}), actor=_actor(link)
        )
    except EpisodeNotFound:
        return 404, GONE
    except CorrectionInvalid as exc:
        return 422, _refused_correction(exc)
    if not report.changes:
        return 200, Notice(f"Nothing changed: {what} already said exactly that.")
    return 200, Notice(f"Corrected: {what} now reads as you wrote it.")


def item(
    db: Database, link: MemoryLink, event_id: int, action: ItemAction, text: str, confirmed: bool
) -> tuple[int, Notice]:
    """Mark an open question or commitment done, reword it, or forget it (drop it from its episode)."""
    event = _owned(db, link, "page_event_owner", event_id)
    if event is None:
        return 404, GONE
    if action == "forget" and not confirmed:
        return 422, UNCONFIRMED
    change: dict[str, Any] = (
        {"drop_events": [event_id]}
        if action == "forget"
        else {"events": {event_id: {"status": "done"} if action == "done" else {"text": text}}}
    )
    try:
        correct_episode(db, link.tenant_id, event["episode_id"], correction_from(change), actor=_actor(link))
    except EpisodeNotFound:
        return 404, GONE
    except CorrectionInvalid as exc:
        return 422, _refused_correction(exc)
    quoted = f"\u201c{event['what']}\u201d"
    return 200, Notice(
        {
            "done": f"Marked as done: {quoted}.",
            "correct": f"Corrected: {quoted} now reads \u201c{text.strip()}\u201d.",
            "forget": f"Forgotten: {quoted}. It will not be brought up again.",
        }[action]
    )


def _refused_correction(exc: CorrectionInvalid) -> Notice:
    message = str(exc)
    if message.startswith("summary:"):
        return Notice("Nothing was changed: a summary needs between 10 and 1,200 characters.", ok=False)
    if message.startswith("events."):
        return Notice("Nothing was changed: the new wording needs between 3 and 400 characters.", ok=False)
    return Notice(f"Nothing was changed: {message}.", ok=False)
