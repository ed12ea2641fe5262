"""One group, one (tenant, user, period): read and compress it, embed it, write it.

**Idempotent, one group per transaction.** The group is read (:func:`prepare_group`), compressed
with no transaction open, embedded in a batch with others (:func:`embed_prepared`), and written in
one tenant-scoped transaction under a per-user advisory lock (:func:`write_group`), only if its
sources and supers are still what was read (else it is left for the next run, ``changed``). Old
supers are retired (:func:`jobs.compress.state.retire`); the new super, its events, entities,
lineage, the source pointers and the model-call rows commit together. A failed group leaves no
trace but its model-call rows; a re-run completes it.

**What a super holds.** Its events are the period's decisions and the questions and commitments
still open, each a copy of its source event with ``source_event_id`` pointing at it, so every one of
them stays reachable from the super (:func:`super_episode`): the compressor's highlights first
(restated), then every other carried event (copied verbatim), by time. **Evidence of a super event**
is the source event's evidence, copied unchanged: indexes of the messages of the *source session's*
transcript (follow ``source_event_id`` to its episode and transcript), with the source's
``evidence_quote``, ``occurred_at``, ``who``, ``due`` and ``status``. A lineage row links the super to
every source, and each source gets ``compressed_into``: recall (``status='current' AND
compressed_into IS NULL``) then shows the super instead of its sources, which stay in place for
analysts.

**Lines.** A super holds no lines of its own: recall searches the lines of the sessions it holds, each
session chosen by its own scores as any candidate is, and quotes them under the super, each dated by its own
session (sql/recall.sql recall_scores). So the facts a period's sessions said stay quotable, and a compressed
period costs recall what its sessions did. (Until migration 0041 a super carried a copy of every line of its
period, and the line search read all of them whenever it picked the super: a heavy user's recall 110 ms -> 1.12 s,
bench/compressed_recall.py.)

**Vectors.** A super's embedding is of its summary, tags, highlighted events (at most 5) and
entities (:meth:`PreparedGroup.vector_text`); its full-text index covers every carried event.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from jobs.compress.compressor import Compression, Compressor, SourceEpisode
from jobs.compress.periods import Period, sources_hash
from jobs.compress.state import (
    GroupState,
    group_scope,
    group_state,
    lock_user,
    read_group,
    retire,
)
from jobs.db import Database
from jobs.embeddings import Embedder
from jobs.errors import ConfigError, EpisodesError, ModelError
from jobs.models import EpisodeExtraction, KeyEvent, ModelCall, episode_text
from jobs.sql import query
from jobs.store import EpisodeRow, insert_episode, record_calls

log = logging.getLogger(__name__)


@dataclass
class GroupOutcome:
    """What became of a group: created, rebuilt, removed, unchanged, single, skipped, changed,
    uncompressed or failed; with the sources compressed, the model calls made and the new super."""

    outcome: str
    sources: int = 0
    calls: list[ModelCall] = field(default_factory=list)
    error: str | None = None
    super_id: int | None = None


@dataclass
class PreparedGroup:
    """A group read and compressed, waiting for its embedding and its write."""

    tenant_id: str
    user_id: str
    period: Period
    state: GroupState
    sources: list[SourceEpisode]
    action: str
    comp: Compression | None = None
    episode: EpisodeExtraction | None = None
    source_event_ids: list[int] = field(default_factory=list)
    done: GroupOutcome | None = None  # set when there is nothing to write

    @property
    def scope(self) -> dict[str, Any]:
        return group_scope(self.tenant_id, self.user_id, self.period)

    def vector_text(self) -> str | None:
        """What a super's vector embeds: summary, tags, the (at most 5) highlighted events, entities.

        Every carried event goes into the full-text index; the vector leaves the long tail out, as
        all-MiniLM-L6-v2 reads only the first 256 word pieces anyway (and 4x faster without them).
        """
        if self.episode is None or self.comp is None:
            return None
        ep = self.episode
        shown = [e.what for e in ep.key_events[: min(len(self.comp.highlights), 5)]]
        return episode_text(ep.summary, ep.topic_tags, shown, [e.name for e in ep.entities])


def super_episode(sources: Sequence[SourceEpisode], comp: Compression) -> tuple[EpisodeExtraction, list[int]]:
    """The super's episode: highlights first (restated), then every other carried event (copied), by time."""
    by_id = {e.id: e for s in sources for e in s.events}
    chosen = [(by_id[i], what) for i, what in comp.highlights if i in by_id]
    seen = {e.id for e, _ in chosen}
    rest = sorted(
        (e for e in by_id.values() if e.id not in seen), key=lambda e: (e.occurred_at, e.episode_id, e.ordinal)
    )
    events = [*chosen, *((e, e.what) for e in rest)]
    episode = EpisodeExtraction.model_construct(
        summary=comp.summary,
        topic_tags=list(comp.topic_tags),
        importance=float(comp.importance),
        key_events=[
            KeyEvent.model_construct(type=e.type, what=what, evidence=list(e.evidence), who=e.who or "user", due=e.due)
            for e, what in events
        ],
        entities=list(comp.entities),
    )
    return episode, [e.id for e, _ in events]


def prepare_group(
    db: Database,
    tenant_id: str,
    user_id: str,
    period: Period,
    *,
    compressor: Callable[[], Compressor],
    job_run_id: int | None = None,
    force: bool = False,
    only_compressed: bool = False,
) -> PreparedGroup:
    """Read one (tenant, user, period), decide, and compress it (model calls, no transaction open).

    A :class:`~jobs.errors.ConfigError` stops the run; any other failure fails this group only.
    """
    state, sources = read_group(db, group_scope(tenant_id, user_id, period))
    prep = PreparedGroup(tenant_id, user_id, period, state, sources, state.action(period, force=force))
    if only_compressed and not state.current and prep.action in ("created", "rebuilt"):
        prep.done = GroupOutcome("uncompressed")
    elif prep.action in ("unchanged", "single", "skipped"):
        prep.done = GroupOutcome(prep.action)
    elif prep.action != "removed":
        try:
            prep.comp = compressor().compress(period, sources)
            prep.episode, prep.source_event_ids = super_episode(sources, prep.comp)
        except ConfigError:
            raise
        except Exception as exc:
            prep.done = _failed(db, prep, exc, list(exc.calls) if isinstance(exc, ModelError) else [], job_run_id)
    return prep


def _failed(
    db: Database, prep: PreparedGroup, exc: BaseException, calls: list[ModelCall], job_run_id: int | None
) -> GroupOutcome:
    """Record the failed group's model calls (and nothing else): the group stays as it was."""
    if not isinstance(exc, EpisodesError):
        log.exception("unexpected compress failure", extra={"action": "compress_error", "tenant": prep.tenant_id})
    with db.tenant(prep.tenant_id) as conn:
        record_calls(
            conn, calls, tenant_id=prep.tenant_id, user_id=prep.user_id, transcript_id=None, job_run_id=job_run_id
        )
    log.warning(
        "compress failed: %s",
        exc,
        extra={
            "action": "compress_failed",
            "tenant": prep.tenant_id,
            "user": prep.user_id,
            "period": prep.period.label,
        },
    )
    return GroupOutcome("failed", calls=calls, error=f"{prep.tenant_id}/{prep.user_id} {prep.period.label}: {exc}")


def embed_prepared(
    db: Database, batch: Sequence[PreparedGroup], embedder: Callable[[], Embedder], job_run_id: int | None = None
) -> list[np.ndarray | None]:
    """One embedding call for a batch of prepared groups (batching is ~3x faster on a CPU)."""
    todo = [i for i, p in enumerate(batch) if p.done is None and p.vector_text() is not None]
    vectors: list[np.ndarray | None] = [None] * len(batch)
    if not todo:
        return vectors
    try:
        for i, vector in zip(todo, embedder().embed([batch[i].vector_text() or "" for i in todo])):
            vectors[i] = vector
    except ConfigError:
        raise
    except Exception as exc:
        for i in todo:
            comp = batch[i].comp
            batch[i].done = _failed(db, batch[i], exc, list(comp.calls if comp else []), job_run_id)
    return vectors


def write_group(
    db: Database, prep: PreparedGroup, vector: np.ndarray | None, job_run_id: int | None = None
) -> GroupOutcome:
    """One tenant-scoped transaction: retire old supers, insert the new one with its events, entities,
    lineage, source pointers and model-call rows, only if the group is still as it was read."""
    if prep.done is not None:
        return prep.done
    comp, scope, state, sources = prep.comp, prep.scope, prep.state, prep.sources
    calls = comp.calls if comp else []
    with db.tenant(prep.tenant_id) as conn:
        lock_user(conn, scope)
        fresh = group_state(conn, scope, conn.execute(query("compress_lock_group_sources"), scope).fetchall())
        if fresh.key() != state.key():  # changed since it was read: the next run picks it up
            record_calls(
                conn, calls, tenant_id=prep.tenant_id, user_id=prep.user_id, transcript_id=None, job_run_id=job_run_id
            )
            return GroupOutcome("changed", calls=calls)
        if comp is None or prep.episode is None:
            retire(conn, scope, fresh, delete_all=True)
            return GroupOutcome("removed")
        kept = retire(conn, scope, fresh, delete_all=False)
        purposes = {s.purpose for s in sources}
        row = EpisodeRow(
            tenant_id=prep.tenant_id,
            user_id=prep.user_id,
            kind="super",
            episode=prep.episode,
            started_at=min(s.started_at for s in sources),
            ended_at=max(s.ended_at for s in sources),
            model=comp.model,
            prompt_version=comp.prompt_version,
            embedding=vector,
            purpose=purposes.pop() if len(purposes) == 1 else "general",
            content_hash=sources_hash(state.source_ids),
            period_start=prep.period.start,
            period_end=prep.period.end,
            calls=comp.calls,
            dropped_events=comp.dropped_events,
            dropped_entities=comp.dropped_entities,
        )
        new_id = insert_episode(conn, row, source_event_ids=prep.source_event_ids)
        ids = {"super_id": new_id, "source_ids": list(state.source_ids), **scope}
        conn.execute(query("compress_event_provenance"), ids)
        conn.execute(query("compress_insert_lineage"), ids)
        conn.execute(query("compress_point_sources"), ids)
        if kept:
            conn.execute(query("compress_link_superseded"), {**scope, "ids": kept, "new_id": new_id})
        record_calls(
            conn, calls, tenant_id=prep.tenant_id, user_id=prep.user_id, transcript_id=None, job_run_id=job_run_id
        )
    log.debug(
        "super-summary stored",
        extra={
            "action": "compress_group",
            "tenant": prep.tenant_id,
            "user": prep.user_id,
            "period": prep.period.label,
            "sources": len(sources),
            "super_id": new_id,
        },
    )
    return GroupOutcome(prep.action, sources=len(sources), calls=calls, super_id=new_id)


def process_group(
    db: Database,
    tenant_id: str,
    user_id: str,
    period: Period,
    *,
    compressor: Callable[[], Compressor],
    embedder: Callable[[], Embedder],
    job_run_id: int | None = None,
    force: bool = False,
    only_compressed: bool = False,
) -> GroupOutcome:
    """Bring one (tenant, user, period) up to date: prepare, embed, write."""
    prep = prepare_group(
        db,
        tenant_id,
        user_id,
        period,
        compressor=compressor,
        job_run_id=job_run_id,
        force=force,
        only_compressed=only_compressed,
    )
    (vector,) = embed_prepared(db, [prep], embedder, job_run_id)
    return write_group(db, prep, vector, job_run_id)
