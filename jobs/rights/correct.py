"""The user corrects one episode: its summary, an event's text or status, or drops an event.

``correct_episode(db, tenant, episode_id, change, actor=...)`` runs in one tenant-scoped
transaction (row-level security: an id of another tenant is simply not found), all or nothing:

1. lock the episode (an unknown id, or one of another tenant, raises
   :class:`~jobs.errors.EpisodeNotFound`; one replaced by a re-summarisation of its session raises
   :class:`~jobs.errors.CorrectionInvalid` naming the current one);
2. check the change against the episode (every event id must be one of *this* episode's; a status
   only on an open question or commitment): a failure raises ``CorrectionInvalid`` naming the field;
3. apply it. Event changes reach the event's copies in super-summaries too (``source_event_id``),
   so a compressed episode's correction shows where recall shows it;
4. append one ``episode_corrections`` row per changed field: actor, time, episode, field, old and
   new value. That row is the audit and the durable record of what the user said (migration 0011);
5. re-embed and re-index every episode touched (:mod:`jobs.rights.reindex`): recall then finds it by
   the corrected words and no longer by the removed ones, in warm per-user copies too, as the update
   stamps ``changed_xid``.

**A re-summarisation does not undo a correction.** When the session is summarised again (its
transcript changed, or the prompt version did), the summarize job re-applies the session's
corrections, in order, to the new extraction before it is embedded and written
(:mod:`jobs.rights.standing`): a corrected summary replaces the model's, and an event correction
applies to the new episode's event of the same type whose text is near-identical to the text the
correction was made on. A correction is the user's word about the session, so it is not offered
to the model to weigh: it is applied.

A super-summary can be corrected (its summary; its events are copies, corrected through their
source), but super corrections are not re-applied when compress later rebuilds the period from
changed sources: the new super is written from the (corrected) sources.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)

from jobs.concepts import OPEN_ITEM_TYPES
from jobs.db import Database
from jobs.embeddings import Embedder, embedder_for
from jobs.errors import CorrectionInvalid, EpisodeNotFound
from jobs.rights.reindex import reindex_episodes
from jobs.sql import query

log = logging.getLogger(__name__)

NO_NUL = r"^[^\x00]*$"  # PostgreSQL text cannot hold NUL: refused as invalid, not left to fail in the database
EventId = Annotated[int, Field(ge=1, le=2**63 - 1)]  # a bigint id; larger numbers are refused, not sent


class EventChange(BaseModel):
    """A change to one event of the episode."""

    model_config = ConfigDict(extra="forbid")

    text: (
        Annotated[str, StringConstraints(strip_whitespace=True, min_length=3, max_length=400, pattern=NO_NUL)] | None
    ) = Field(
        default=None,
        description="The event's corrected sentence (3-400 characters), replacing what the episode recorded.",
    )
    status: Literal["open", "done"] | None = Field(
        default=None,
        description=(
            "Open questions and commitments only: `done` marks the question answered or the commitment "
            "fulfilled, `open` reopens it."
        ),
    )

    @model_validator(mode="after")
    def _something(self) -> EventChange:
        if self.text is None and self.status is None:
            raise ValueError("give text, status or both")
        return self


class EpisodeCorrection(BaseModel):
    """What the user corrects in one episode. Every part is optional; at least one must be given.

    The correction survives a later re-summarisation of the session."""

    model_config = ConfigDict(extra="forbid")

    summary: (
        Annotated[str, StringConstraints(strip_whitespace=True, min_length=10, max_length=1200, pattern=NO_NUL)] | None
    ) = Field(
        default=None,
        description="The corrected summary (10-1,200 characters), replacing the episode's summary.",
    )
    drop_events: list[EventId] = Field(
        default_factory=list,
        max_length=50,
        description="Ids of events of this episode to remove (a wrong decision, a question never asked).",
    )
    events: dict[EventId, EventChange] = Field(
        default_factory=dict,
        max_length=50,
        description="Changes to events of this episode, by event id: a corrected text and/or a status.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> EpisodeCorrection:
        if self.summary is None and not self.drop_events and not self.events:
            raise ValueError("nothing to correct: give summary, drop_events or events")
        if len(set(self.drop_events)) != len(self.drop_events):
            raise ValueError("drop_events lists an event twice")
        both = sorted(set(self.drop_events) & set(self.events))
        if both:
            raise ValueError(f"event {both[0]} is both dropped and changed")
        return self


def correction_from(data: Mapping[str, Any]) -> EpisodeCorrection:
    """Validate a correction; a problem raises :class:`CorrectionInvalid` naming the field (one line)."""
    try:
        return EpisodeCorrection.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "correction"
        message = first["msg"].removeprefix("Value error, ")  # pydantic's wording for our own checks
        raise CorrectionInvalid(message, field=where) from None


@dataclass
class CorrectionReport:
    tenant_id: str
    episode_id: int
    dry_run: bool = False
    changes: list[str] = field(default_factory=list)
    correction_ids: list[int] = field(default_factory=list)
    reindexed: list[int] = field(default_factory=list)

    def line(self) -> str:
        if not self.changes:
            return f"episode {self.episode_id}: nothing changed (the correction matches what is stored)"
        verb = "would correct" if self.dry_run else "corrected"
        supers = [i for i in self.reindexed if i != self.episode_id]
        text = f"{verb} episode {self.episode_id}: {', '.join(self.changes)}" + (
            " (dry run, nothing changed)" if self.dry_run else ""
        )
        if supers:
            text += f"; also in super-summar{'y' if len(supers) == 1 else 'ies'} {', '.join(map(str, supers))}"
        if self.correction_ids and not self.dry_run:
            text += f"; recorded as correction{'s' if len(self.correction_ids) > 1 else ''} " + ", ".join(
                f"#{i}" for i in self.correction_ids
            )
        return text


class _DryRun(Exception):
    """Raised inside the transaction to roll a dry run back."""


def correct_episode(
    db: Database,
    tenant_id: str,
    episode_id: int,
    change: EpisodeCorrection,
    *,
    actor: str,
    embedder: Embedder | None = None,
    dry_run: bool = False,
) -> CorrectionReport:
    """Apply ``change`` to episode ``episode_id`` of ``tenant_id``; see the module docstring.

    ``actor`` says who corrected it (e.g. ``user:u-42`` from the memory page, ``operator:cli``); it is
    stored with the audit row and removed with it when the episode or the user is erased.
    ``dry_run`` checks and applies the change, then rolls it all back.
    """
    if not 1 <= len(actor) <= 200:
        raise CorrectionInvalid("must be 1-200 characters", field="actor")
    report = CorrectionReport(tenant_id, episode_id, dry_run)
    try:
        with db.tenant(tenant_id) as conn:
            scope = {"tenant_id": tenant_id, "episode_id": episode_id}
            episode = conn.execute(query("correct_lock_episode"), scope).fetchone()
            if episode is None:
                raise EpisodeNotFound(f"episode {episode_id} not found in tenant {tenant_id!r}")
            if episode["status"] != "current":
                raise CorrectionInvalid(
                    f"episode {episode_id} was replaced by episode {episode['superseded_by']} when its session was "
                    "summarised again; correct that one",
                    field="episode_id",
                )
            events = {r["id"]: r for r in conn.execute(query("correct_episode_events"), scope)}
            _check(change, events, episode_id)
            touched = _apply(conn, episode, events, change, actor, report)
            if report.changes:
                reindex_episodes(conn, tenant_id, touched, embedder or embedder_for(db.settings))
                report.reindexed = sorted(touched)
            if dry_run:
                raise _DryRun()
    except _DryRun:
        report.correction_ids = []
    log.log(
        logging.DEBUG if dry_run else logging.INFO,
        "correction dry run" if dry_run else "episode corrected",
        extra={
            "action": "correct_dry_run" if dry_run else "correct_episode",
            "tenant": tenant_id,
            "episode_id": episode_id,
            "changes": len(report.changes),
        },
    )
    return report


def _check(change: EpisodeCorrection, events: Mapping[int, Any], episode_id: int) -> None:
    for at, event_id in enumerate(change.drop_events):
        if event_id not in events:
            raise CorrectionInvalid(
                f"event {event_id} is not an event of episode {episode_id}", field=f"drop_events[{at}]"
            )
    for event_id, edit in change.events.items():
        if event_id not in events:
            raise CorrectionInvalid(
                f"event {event_id} is not an event of episode {episode_id}", field=f"events.{event_id}"
            )
        if edit.status is not None and events[event_id]["type"] not in OPEN_ITEM_TYPES:
            raise CorrectionInvalid(
                f"event {event_id} is a {events[event_id]['type']}; only open questions and commitments have a status",
                field=f"events.{event_id}.status",
            )


def _apply(
    conn: Any,
    episode: Mapping[str, Any],
    events: Mapping[int, Any],
    change: EpisodeCorrection,
    actor: str,
    report: CorrectionReport,
) -> set[int]:
    """Write the changes and their audit rows; return the ids of the episodes whose text changed."""
    tenant_id, episode_id = report.tenant_id, report.episode_id
    base = {
        "tenant_id": tenant_id,
        "user_id": episode["user_id"],
        "session_id": episode["session_id"],
        "episode_id": episode_id,
        "actor": actor,
        "event_id": None,
        "event_type": None,
        "event_text": None,
    }
    touched: set[int] = set()

    def audit(what: str, **values: Any) -> None:
        report.changes.append(what)
        report.correction_ids.append(conn.execute(query("insert_correction"), {**base, **values}).fetchone()["id"])

    if change.summary is not None and change.summary != episode["summary"]:
        conn.execute(query("correct_set_summary"), {**base, "summary": change.summary})
        touched.add(episode_id)
        audit("summary", field="summary", old_value=episode["summary"], new_value=change.summary)
    for event_id, edit in change.events.items():
        event = events[event_id]
        text = event["what"]
        scope = {"tenant_id": tenant_id, "event_id": event_id}
        about = {"event_id": event_id, "event_type": event["type"]}
        if edit.text is not None and edit.text != text:
            touched.update(
                r["episode_id"] for r in conn.execute(query("correct_event_text"), {**scope, "text": edit.text})
            )
            audit(
                f"event {event_id} text",
                field="event.text",
                event_text=text,
                old_value=text,
                new_value=edit.text,
                **about,
            )
            text = edit.text
        old_status = "open" if event["status"] == "open" else "done"
        if edit.status is not None and edit.status != old_status:
            conn.execute(query("correct_event_status"), {**scope, "status": edit.status})
            audit(
                f"event {event_id} {edit.status}",
                field="event.status",
                event_text=text,
                old_value=old_status,
                new_value=edit.status,
                **about,
            )
    for event_id in change.drop_events:
        event = events[event_id]
        touched.update(
            r["episode_id"]
            for r in conn.execute(query("correct_drop_event"), {"tenant_id": tenant_id, "event_id": event_id})
        )
        audit(
            f"event {event_id} dropped",
            field="event.drop",
            event_id=event_id,
            event_type=event["type"],
            event_text=event["what"],
            old_value=event["what"],
            new_value=None,
        )
    if touched:  # the user corrected what the episode holds: its quotes of the session must not contradict it
        conn.execute(query("correct_drop_lines"), {"tenant_id": tenant_id, "ids": sorted(touched)})
    return touched


def corrections_of(db: Database, tenant_id: str, episode_id: int) -> list[dict[str, Any]]:
    """The audit rows of one episode, oldest first (contents empty once the episode was erased)."""
    with db.tenant(tenant_id) as conn:
        return conn.execute(
            query("corrections_of_episode"), {"tenant_id": tenant_id, "episode_id": episode_id}
        ).fetchall()
