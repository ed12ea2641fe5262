"""The write of a session episode: from a grounded extraction to the stored episode, in one transaction.

:func:`write_session_episode` reads top to bottom:

1. **standing corrections**: what the user corrected about this session stands on its new episode
   (:func:`jobs.rights.standing.apply_corrections`). None are assumed first, which costs one query in the
   write; the write reads them under the lock on the session's current episode (which a correction takes
   too), and when it finds others it rolls back and writes again with them;
2. **lines**: the session's verbatim lines (:mod:`jobs.extract.lines`), kept unless a correction other than a
   status stands (its quotes might say what the user corrected);
3. **embedding** of the corrected episode, and of the lines (once: they do not change with corrections);
4. **the transaction** (tenant-scoped and pipelined): the transcript completed and the session's current
   episode locked and superseded, only while this worker holds the claim; the corrections asked for; the
   episode with its **events**, lines and entities inserted; the **later-wins links**: the superseded
   episode to its successor, the offered open items it resolves, the offered decisions it replaces; the
   model calls recorded; the corrections read and compared; the corrected statuses set.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import psycopg

from jobs.db import Conn, Database
from jobs.embeddings import Embedder
from jobs.extract.grounding import Grounded
from jobs.extract.lines import episode_lines
from jobs.faults import crash_point
from jobs.models import ExtractionResult, Transcript, search_text
from jobs.rights.standing import Corrected, Correction, apply_corrections
from jobs.sql import query
from jobs.store import EpisodeLine, EpisodeRow, insert_episode, record_calls
from jobs.summarize.report import StageClock

CORRECTION_ATTEMPTS = 3  # writes before a session whose corrections keep changing is retried later


@dataclass(frozen=True)
class Written:
    """How the write ended: ``written`` (``episode_id``, and the extraction as corrected), ``lost`` (this
    worker no longer held the claim: nothing was written) or ``unsettled`` (the session's corrections kept
    changing while it was written: nothing was written)."""

    outcome: Literal["written", "lost", "unsettled"]
    episode_id: int | None = None
    corrected: Corrected | None = None


def write_session_episode(
    db: Database,
    embedder: Embedder,
    transcript: Transcript,
    result: ExtractionResult,
    grounded: Grounded,
    *,
    owner: str,
    job_run_id: int | None,
    clock: StageClock,
) -> Written:
    """Correct, embed and write ``grounded`` (the extraction ``result`` grounded in ``transcript``) as the
    session's episode, in one transaction that commits only while ``owner`` holds the claim."""
    standing: tuple[Correction, ...] = ()
    lines: list[EpisodeLine] | None = None
    line_vectors: np.ndarray | None = None
    for _ in range(CORRECTION_ATTEMPTS):
        corrected = apply_corrections(grounded.episode, standing)
        with clock("embed"):
            if lines is None:
                lines = episode_lines(transcript.messages)
                vectors = embedder.embed([search_text(corrected.episode), *(ln.text for ln in lines)])
                line_vectors = vectors[1:] if lines else None
                vector = vectors[0]
            else:
                vector = embedder.embed([search_text(corrected.episode)])[0]
        quoted = all(c.field == "event.status" for c in standing)
        row = EpisodeRow(
            tenant_id=transcript.tenant_id,
            user_id=transcript.user_id,
            kind="session",
            episode=corrected.episode,
            started_at=transcript.started_at or transcript.ended_at,
            ended_at=transcript.ended_at,
            model=result.model,
            prompt_version=result.prompt_version,
            embedding=vector,
            purpose=transcript.purpose,
            transcript_id=transcript.id,
            session_id=transcript.session_id,
            content_hash=transcript.content_hash,
            calls=result.calls,
            dropped_events=grounded.dropped_events,
            dropped_entities=grounded.dropped_entities,
            lines=lines if quoted else (),
            line_vectors=line_vectors if quoted else None,
        )
        with clock("write"), db.tenant(transcript.tenant_id, pipeline=True) as conn:
            taken = _take(conn, transcript, worker=owner)
            if taken is None:
                raise psycopg.Rollback()  # nothing of this attempt may persist
            # The old episode is locked now, and a correction locks it too: this list is complete. Read with
            # the new episode's id, in one round trip: that id is the one wait, what follows goes out with
            # the commit.
            corrections = _ask_corrections(conn, transcript)
            episode_id = insert_episode(conn, row, messages=transcript.messages)
            _link(conn, transcript, row, episode_id, superseded=taken.old_id)
            record_calls(
                conn,
                row.calls,
                tenant_id=transcript.tenant_id,
                user_id=transcript.user_id,
                transcript_id=transcript.id,
                job_run_id=job_run_id,
            )
            crash_point("during_commit")
            found = corrections()
            if found != standing:
                raise psycopg.Rollback()  # a correction arrived: write again with it
            _set_statuses(conn, transcript.tenant_id, episode_id, corrected.statuses)
        if taken is None:
            return Written("lost")
        if found == standing:
            return Written("written", episode_id, corrected)
        standing = found
    return Written("unsettled")


@dataclass(frozen=True)
class _Taken:
    """A session taken over for its new episode; ``old_id``: the episode superseded, if there was one."""

    old_id: int | None


def _take(conn: Conn, transcript: Transcript, *, worker: str) -> _Taken | None:
    """Complete the transcript, lock the session's current episode (as a correction locks it, so the
    corrections read after this are all there are) and, on a re-run, supersede it; None when this worker
    no longer holds the claim (its lease expired and another worker took over, or the transcript changed
    meanwhile). The first two statements go out together: one round trip in a pipelined transaction."""
    tenant = transcript.tenant_id
    done = conn.execute(
        query("complete_transcript"),
        {"tenant_id": tenant, "id": transcript.id, "worker": worker, "content_hash": transcript.content_hash},
    )
    current = conn.execute(query("current_session_episode"), {"tenant_id": tenant, "session_id": transcript.session_id})
    if done.fetchone() is None:
        return None
    old = current.fetchone()
    if old is None:
        return _Taken(None)
    conn.execute(query("supersede_session_episode"), {"tenant_id": tenant, "id": old["id"]})
    return _Taken(old["id"])


def _ask_corrections(conn: Conn, transcript: Transcript) -> Callable[[], tuple[Correction, ...]]:
    """Ask for the session's corrections, oldest first (erased ones are gone); the function returned reads
    them. In a pipelined transaction the answer waits for the next statement that is read, and both take
    one round trip."""
    rows = conn.execute(
        query("standing_corrections"), {"tenant_id": transcript.tenant_id, "session_id": transcript.session_id}
    )
    return lambda: tuple(
        Correction(r["id"], r["field"], r["event_type"], r["event_text"], r["new_value"]) for r in rows
    )


def _link(conn: Conn, transcript: Transcript, row: EpisodeRow, episode_id: int, *, superseded: int | None) -> None:
    """Later wins: the superseded episode points at its successor; the offered open items the new episode
    resolves are resolved by it; the offered decisions it replaces no longer stand."""
    tenant, user = transcript.tenant_id, transcript.user_id
    if superseded is not None:
        conn.execute(query("link_superseded"), {"tenant_id": tenant, "old_id": superseded, "new_id": episode_id})
    for res in row.episode.resolved_items:
        conn.execute(
            query("resolve_item"),
            {
                "event_id": res.item_id,
                "episode_id": episode_id,
                "resolved_at": transcript.ended_at,
                "tenant_id": tenant,
                "user_id": user,
            },
        )
    for ordinal, event in enumerate(row.episode.key_events):
        if event.replaces is not None:
            conn.execute(
                query("replace_item"),
                {
                    "event_id": event.replaces,
                    "episode_id": episode_id,
                    "ordinal": ordinal,
                    "tenant_id": tenant,
                    "user_id": user,
                },
            )


def _set_statuses(conn: Conn, tenant_id: str, episode_id: int, statuses: dict[int, str]) -> None:
    """Status corrections on the written episode's events (by ordinal)."""
    for ordinal, status in statuses.items():
        conn.execute(
            query("reapply_event_status"),
            {"tenant_id": tenant_id, "episode_id": episode_id, "ordinal": ordinal, "status": status},
        )
