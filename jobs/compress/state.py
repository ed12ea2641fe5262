"""A group's database state: what a (tenant, user, period) holds, what to do with it, and retiring old supers.

A super stores the hash of its source ids (``content_hash``, :func:`~jobs.compress.periods.sources_hash`).
A group whose sources, hash and pointers agree is ``unchanged``; one whose super lies in a longer
period is ``skipped`` (left to that period's runs); one with fewer than two sources is ``single``,
or ``removed`` when it still has a super; otherwise its super is ``created`` or ``rebuilt``.

Old supers are superseded (kept for analysts, linked to their successor), or deleted when a source of
theirs was erased (lineage rows cascade, so the hash no longer matches): no text derived from an
erased source survives, in a current super or in the period's history. Every query here runs inside
``Database.tenant()`` and names the tenant (``scope``): row-level security confines it to one tenant,
and on a Citus cluster the explicit filter routes it to the node holding the tenant.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from jobs.compress.compressor import SourceEpisode, SourceEvent
from jobs.compress.periods import Period, sources_hash
from jobs.db import Conn, Database
from jobs.sql import query

USER_LOCK_NAMESPACE = 0x636D7072  # "cmpr": first key of the per-user transaction lock


@dataclass(frozen=True)
class StoredSuper:
    """A super a group's sources point at (or its period's history), as read."""

    id: int
    status: str
    period_start: dt.date
    period_end: dt.date
    content_hash: str | None
    lineage: tuple[int, ...]

    @property
    def damaged(self) -> bool:
        """A source of this super was deleted (lineage cascades): its text must not survive."""
        return sources_hash(self.lineage) != self.content_hash


@dataclass(frozen=True)
class GroupState:
    """A group's current sources, their ``compressed_into`` pointers (by source id), and the supers they point at."""

    source_ids: tuple[int, ...]
    pointers: tuple[int | None, ...]
    supers: tuple[StoredSuper, ...]

    @property
    def current(self) -> list[StoredSuper]:
        return [s for s in self.supers if s.status == "current"]

    def key(self) -> tuple[Any, ...]:
        """What must not change between the read and the write."""
        return (self.source_ids, tuple((s.id, s.status, s.content_hash) for s in self.supers))

    def action(self, period: Period, *, force: bool = False) -> str:
        current = self.current
        if any(not period.contains(s.period_start, s.period_end) for s in current):
            return "skipped"  # compressed into a longer period: leave it to that period's runs
        if len(self.source_ids) < 2:
            return "removed" if current else "single"
        exact = [s for s in current if (s.period_start, s.period_end) == (period.start, period.end)]
        if (
            not force
            and len(current) == 1
            and exact
            and exact[0].content_hash == sources_hash(self.source_ids)
            and all(p == exact[0].id for p in self.pointers)
        ):
            return "unchanged"
        return "rebuilt" if current else "created"


def group_scope(tenant_id: str, user_id: str, period: Period) -> dict[str, Any]:
    """The query parameters that name one group."""
    return {
        "tenant_id": tenant_id,
        "user_id": user_id,
        "start": period.start_ts,
        "end": period.end_ts,
        "period_start": period.start,
        "period_end": period.end,
    }


def group_state(conn: Conn, scope: dict[str, Any], rows: Sequence[dict[str, Any]]) -> GroupState:
    """The state of a group whose source rows (``id``, ``compressed_into``) were just read."""
    ids = sorted(r["id"] for r in rows)
    pointers = [r["compressed_into"] for r in sorted(rows, key=lambda r: r["id"])]
    linked = conn.execute(
        query("compress_linked_supers"), {**scope, "ids": sorted({p for p in pointers if p is not None})}
    ).fetchall()
    supers = tuple(
        StoredSuper(r["id"], r["status"], r["period_start"], r["period_end"], r["content_hash"], tuple(r["lineage"]))
        for r in linked
    )
    return GroupState(tuple(ids), tuple(pointers), supers)


def read_group(db: Database, scope: dict[str, Any]) -> tuple[GroupState, list[SourceEpisode]]:
    """A group's state and its source episodes with their carried events and entities (one transaction)."""
    with db.tenant(scope["tenant_id"]) as conn:
        rows = conn.execute(query("compress_group_sources"), scope).fetchall()
        state = group_state(conn, scope, rows)
        ids = [r["id"] for r in rows]
        events: dict[int, list[SourceEvent]] = {}
        for e in conn.execute(query("compress_source_events"), {**scope, "ids": ids}):
            events.setdefault(e["episode_id"], []).append(
                SourceEvent(
                    e["id"],
                    e["episode_id"],
                    e["ordinal"],
                    e["type"],
                    e["what"],
                    e["who"],
                    e["due"],
                    e["occurred_at"],
                    tuple(e["evidence"]),
                )
            )
        entities: dict[int, list[tuple[str, str]]] = {}
        for e in conn.execute(query("compress_source_entities"), {**scope, "ids": ids}):
            entities.setdefault(e["episode_id"], []).append((e["name"], e["kind"]))
    sources = [
        SourceEpisode(
            id=r["id"],
            purpose=r["purpose"],
            summary=r["summary"],
            topic_tags=tuple(r["topic_tags"] or ()),
            importance=float(r["importance"]),
            started_at=r["started_at"],
            ended_at=r["ended_at"],
            events=tuple(events.get(r["id"], ())),
            entities=tuple(entities.get(r["id"], ())),
            embedding=None if r["embedding"] is None else r["embedding"].to_numpy(),
            compressed_into=r["compressed_into"],
        )
        for r in rows
    ]
    return state, sources


def lock_user(conn: Conn, scope: dict[str, Any]) -> None:
    """Serialise the writers of one user's supers until the transaction ends."""
    conn.execute(query("compress_lock_user"), {**scope, "namespace": USER_LOCK_NAMESPACE})


def damaged_history(conn: Conn, scope: dict[str, Any]) -> list[int]:
    """Superseded supers in the period that a deleted source belonged to."""
    history = conn.execute(query("compress_history_supers"), scope).fetchall()
    return [h["id"] for h in history if sources_hash(h["lineage"]) != h["content_hash"]]


def delete_supers(conn: Conn, scope: dict[str, Any], ids: list[int]) -> None:
    """Delete the user's supers ``ids``: their events, entities and lineage go with them, and what
    pointed at them (their sources' compressed_into, ...) is cleared first (migration 0016)."""
    if ids:
        params = {**scope, "ids": ids}
        conn.execute(query("release_references"), params)
        conn.execute(query("compress_delete_supers"), params)


def retire(conn: Conn, scope: dict[str, Any], state: GroupState, *, delete_all: bool) -> list[int]:
    """Delete damaged supers (and damaged history in the period); supersede the others. Returns those kept."""
    doomed = damaged_history(conn, scope)
    keep: list[int] = []
    for s in state.current:
        (doomed if delete_all or s.damaged else keep).append(s.id)
    delete_supers(conn, scope, doomed)
    if keep:
        conn.execute(query("compress_supersede_supers"), {**scope, "ids": keep})
    return keep
