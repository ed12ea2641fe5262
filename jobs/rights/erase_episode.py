"""The user forgets one episode ("forget this"): gone from recall, from analysts, from every summary.

:func:`erase_episodes` is the primitive (a pruning policy reuses it): inside the caller's
tenant-scoped transaction it erases session episodes by id, all or nothing:

- each asked episode **and every other version of its session** (episodes an earlier summarisation
  wrote and a re-summarisation superseded: they hold the same memory), with their events, entities
  and lineage rows;
- **every super-summary whose lineage includes one of them**, current or superseded, in the same
  transaction, so no text derived from the erased episode survives even if the rebuild below fails.
  The super's other sources return to recall (their ``compressed_into`` is cleared);
- **what the erased episodes said about other episodes no longer stands**: open questions and
  commitments they resolved are open again, and decisions or preferences they replaced stand again
  (the rule a superseded episode already follows), so no resolution or ``superseded_by`` dangles;
- the **correction audit** of those episodes keeps that a correction happened (episode, field,
  time) and loses its contents, actor and session (``episode_corrections.erased_at``);
- the session's **transcript is kept** (it is the host application's record of the chat) but marked
  ``forgotten_at`` and done; a trigger (migration 0011) holds it at done whatever would requeue it,
  so it is never summarised into the same memory again. Model-call rows (metadata only) stay;
- one ``erasures`` row per user concerned, ``scope = 'episode'``: tenant, the salted hash of the user
  id, the time and the counts, nothing else (as ``episodes forget --user`` records).

Recall keeps no copy of a user's rows (jobs.recall.scoring): the next recall reads what committed.

A super-summary cannot be erased by itself (:class:`~jobs.errors.SuperSummaryNotErasable`): the next
compress run would write it again from the same sources. Forget its sources instead.

:func:`forget_episode` runs the primitive for one id in its own transaction, then (after the commit,
as it may call the model) rebuilds each removed current super-summary from its remaining sources
with :func:`jobs.compress.rebuild_period`: ``created`` with two or more left, ``single`` when one is
left (it is back in recall on its own), ``failed`` leaves the sources in recall until the next
compress run.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from psycopg.types.json import Jsonb

from jobs.compress import Compressor, rebuild_period
from jobs.db import Conn, Database, one
from jobs.embeddings import Embedder
from jobs.errors import EpisodeNotFound, EpisodesError, SuperSummaryNotErasable
from jobs.rights.forget import user_hash
from jobs.sql import query
from jobs.wording import counted

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RemovedSuper:
    """A super-summary removed because it included an erased episode."""

    id: int
    user_id: str
    status: str
    period_start: dt.date
    period_end: dt.date

    @property
    def label(self) -> str:
        return f"{self.period_start}..{self.period_end}"


@dataclass
class ErasedEpisodes:
    """What :func:`erase_episodes` removed."""

    episode_ids: list[int]
    counts: dict[str, int]
    supers: list[RemovedSuper] = field(default_factory=list)
    erasure_ids: list[int] = field(default_factory=list)
    users: list[str] = field(default_factory=list)  # whose episodes or super-summaries went


def erase_episodes(
    conn: Conn, tenant_id: str, ids: Sequence[int], scope: Literal["episode", "policy"] = "episode"
) -> ErasedEpisodes:
    """Erase the session episodes ``ids`` of ``tenant_id`` (see the module docstring) in ``conn``'s
    transaction, which must be ``Database.tenant(tenant_id)``'s. An unknown id (or another tenant's)
    raises :class:`EpisodeNotFound`, a super-summary's :class:`SuperSummaryNotErasable`; then the
    caller's transaction must roll back (nothing was changed before the check). ``scope`` is what the
    ``erasures`` rows record: the user forgot an episode, or a pruning policy removed it."""
    where: dict[str, Any] = {"tenant_id": tenant_id, "ids": sorted(set(ids))}
    asked = {r["id"]: r for r in conn.execute(query("erase_asked"), where)}
    for episode_id in where["ids"]:
        row = asked.get(episode_id)
        if row is None:
            raise EpisodeNotFound(f"episode {episode_id} not found in tenant {tenant_id!r}")
        if row["kind"] == "super":
            raise SuperSummaryNotErasable(
                f"episode {episode_id} is a super-summary ({row['period_start']}..{row['period_end']}) made from "
                f"episodes {', '.join(map(str, row['sources']))}; forget those (it is rebuilt without them), "
                "or correct its summary"
            )
    sessions = conn.execute(query("erase_lock_sessions"), where).fetchall()
    episode_ids = [r["id"] for r in sessions]
    supers = [
        RemovedSuper(r["id"], r["user_id"], r["status"], r["period_start"], r["period_end"])
        for r in conn.execute(query("erase_lock_supers"), {**where, "ids": episode_ids})
    ]
    doomed = {
        **where,
        "ids": episode_ids + [s.id for s in supers],
        "sessions": sorted({r["session_id"] for r in sessions}),
        "transcript_ids": sorted({r["transcript_id"] for r in sessions if r["transcript_id"] is not None}),
    }
    counts = {
        "reopened_items": conn.execute(query("erase_reopen_items"), doomed).rowcount,
        "restored_decisions": conn.execute(query("erase_restore_replaced"), doomed).rowcount,
        "events": conn.execute(query("erase_delete_events"), doomed).rowcount,
        "entities": conn.execute(query("erase_delete_entities"), doomed).rowcount,
        "lineage": conn.execute(query("erase_delete_lineage"), doomed).rowcount,
        "episodes": _delete_episodes(conn, doomed),
        "super_episodes": len(supers),
        "corrections_scrubbed": conn.execute(query("erase_scrub_corrections"), doomed).rowcount,
        "transcripts_kept": conn.execute(query("erase_forget_transcripts"), doomed).rowcount,
    }
    erased = ErasedEpisodes(
        episode_ids, counts, supers, users=sorted({r["user_id"] for r in sessions} | {s.user_id for s in supers})
    )
    for user_id in sorted({r["user_id"] for r in sessions}):
        mine = [r for r in sessions if r["user_id"] == user_id]
        row = one(
            conn.execute(
                query("insert_episode_erasure"),
                {
                    "tenant_id": tenant_id,
                    "user_hash": user_hash(conn, tenant_id, user_id),
                    "counts": Jsonb({**counts, "episodes_of_user": len(mine)}),
                    "scope": scope,
                },
            )
        )
        erased.erasure_ids.append(row["id"])
    return erased


@dataclass
class EpisodeErasure:
    """What :func:`forget_episode` did (or, with ``dry_run``, would do)."""

    tenant_id: str
    episode_id: int
    counts: dict[str, int]
    dry_run: bool = False
    erased_ids: list[int] = field(default_factory=list)
    supers: list[RemovedSuper] = field(default_factory=list)
    erasure_ids: list[int] = field(default_factory=list)
    rebuilt: dict[int, str] = field(default_factory=dict)  # removed current super id -> rebuild outcome

    def line(self) -> str:
        c = self.counts
        verb = "would erase" if self.dry_run else "erased"
        versions = len(self.erased_ids) - 1
        text = (
            f"{verb} episode {self.episode_id}"
            + (f" and {counted(versions, 'earlier version')} of its session" if versions else "")
            + f": {counted(c.get('events', 0), 'event')}, {counted(c.get('entities', 0), 'entity')}, "
            f"{counted(c.get('super_episodes', 0), 'super-summary')}, "
            f"{counted(c.get('corrections_scrubbed', 0), 'correction')} scrubbed; "
            f"{counted(c.get('reopened_items', 0), 'item')} reopened, "
            f"{counted(c.get('restored_decisions', 0), 'decision')} standing again; transcript kept, never "
            "summarised again"
        )
        if self.erasure_ids:
            text += "; recorded as erasure " + ", ".join(f"#{i}" for i in self.erasure_ids)
        for s in self.supers:
            if s.status == "current":
                outcome = self.rebuilt.get(s.id, "dry_run" if self.dry_run else "to rebuild")
                text += f"; super-summary {s.id} ({s.label}): {OUTCOMES.get(outcome, outcome)}"
        return text + (" (dry run, nothing changed)" if self.dry_run else "")


OUTCOMES = {
    "dry_run": "would be rebuilt from the remaining sources",
    "created": "rebuilt from the remaining sources",
    "single": "removed, its one remaining source is back in recall",
    "uncompressed": "removed, its one remaining source is back in recall",
    "failed": "removed; the rebuild failed, its sources are in recall until the next compress run",
    "changed": "removed; its sources changed meanwhile, the next compress run rebuilds it",
}


def rebuild_supers(
    db: Database,
    tenant_id: str,
    supers: Iterable[RemovedSuper],
    *,
    compressor: Compressor | None = None,
    embedder: Embedder | None = None,
) -> dict[int, str]:
    """After an erasure committed, rebuild the periods of the removed *current* super-summaries from
    their remaining sources, once per period (a pruning run may remove several supers of one period,
    one per batch). Returns removed super id -> outcome (:data:`OUTCOMES` explains each); a failed
    rebuild is logged and reported as ``failed``, never raised (the next compress run redoes it)."""
    outcomes: dict[int, str] = {}
    done: dict[tuple[str, dt.date, dt.date], str] = {}
    for s in supers:
        if s.status != "current":
            continue
        key = (s.user_id, s.period_start, s.period_end)
        if key not in done:
            done[key] = _rebuild(db, tenant_id, s, compressor, embedder)
        outcomes[s.id] = done[key]
    return outcomes


def _rebuild(
    db: Database, tenant_id: str, s: RemovedSuper, compressor: Compressor | None, embedder: Embedder | None
) -> str:
    try:
        return rebuild_period(
            db,
            tenant_id,
            s.user_id,
            s.period_start,
            s.period_end,
            compressor=compressor,
            embedder=embedder,
            recreate=True,
        )
    except EpisodesError as exc:
        log.warning(
            "rebuild after an episode erasure failed: %s",
            exc,
            extra={"action": "forget_episode_rebuild_failed", "tenant": tenant_id, "period": s.label},
        )
        return "failed"


class _DryRun(Exception):
    """Raised inside the transaction to roll a dry run back."""


def forget_episode(
    db: Database,
    tenant_id: str,
    episode_id: int,
    *,
    dry_run: bool = False,
    compressor: Compressor | None = None,
    embedder: Embedder | None = None,
) -> EpisodeErasure:
    """Erase one session episode (see the module docstring): one transaction, all or nothing; then
    rebuild the current super-summaries it was part of (``compressor`` / ``embedder`` as
    :func:`jobs.compress.rebuild_period` takes them; by default from the settings).

    ``dry_run`` does the erasure and rolls it back, so the counts are exactly what would go; no rebuild.
    """
    report = EpisodeErasure(tenant_id, episode_id, {}, dry_run)
    try:
        with db.tenant(tenant_id) as conn:
            erased = erase_episodes(conn, tenant_id, [episode_id])
            report.counts, report.erased_ids, report.supers = erased.counts, erased.episode_ids, erased.supers
            report.erasure_ids = erased.erasure_ids
            if dry_run:
                raise _DryRun()
    except _DryRun:
        report.erasure_ids = []
    if not dry_run:
        report.rebuilt = rebuild_supers(db, tenant_id, report.supers, compressor=compressor, embedder=embedder)
    # A dry run changes nothing and its command prints what it would do: its record is for debugging only.
    log.log(
        logging.DEBUG if dry_run else logging.INFO,
        "episode erasure dry run" if dry_run else "episode erased",
        extra={
            "action": "forget_episode_dry_run" if dry_run else "forget_episode",
            "tenant": tenant_id,
            "episode_id": episode_id,
            "erasures": report.erasure_ids,
            **{f"n_{k}": v for k, v in report.counts.items()},
        },
    )
    return report


def _delete_episodes(conn: Conn, doomed: dict[str, Any]) -> int:
    conn.execute(query("release_references"), doomed)
    return conn.execute(query("erase_delete_episodes"), doomed).rowcount
