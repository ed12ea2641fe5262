"""The one path from an extraction to a stored session episode, for live runs and Message
Batches alike.

:meth:`Finisher.prepare` decides what an extractor is offered (the user's still-open questions
and commitments, and the decisions and preferences that still stand, from earlier sessions) or
completes the claim at once when this content was already summarised with this prompt version.
:meth:`Finisher.finish` grounds the extraction in the transcript and in the items that were offered
(a resolution must name an offered open item, a replacement an offered decision) and has
:func:`jobs.summarize.write.write_session_episode` correct, embed and write it: the episode, its events,
lines and entities, the later-wins links, the model-call rows and the transcript's state change in one
tenant-scoped transaction that commits only while the caller still holds the claim.
:meth:`Finisher.fail` and :meth:`Finisher.release` are the two ways a claim ends without an episode.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace

from jobs.db import Database, notify_eligible
from jobs.embeddings import Embedder
from jobs.embeddings.protocol import Vectors, embed_queries
from jobs.errors import ConfigError, ExtractionError
from jobs.extract.grounding import ground, ground_summary, ungrounded_names
from jobs.models import (
    MAX_CURRENT_DECISIONS,
    MAX_OPEN_ITEMS,
    MAX_RELATED_DECISIONS,
    ExtractionResult,
    ModelCall,
    OpenItem,
    Transcript,
)
from jobs.sql import query
from jobs.store import record_calls
from jobs.summarize.report import StageClock
from jobs.summarize.write import write_session_episode

INVENTED_PREFIX = "invented summary:"  # how a failed attempt's error starts (`episodes status` counts them)


class InventedSummary(ExtractionError):
    """Every sentence of the model's summary names something the transcript does not."""


log = logging.getLogger(__name__)

RETRY_BASE_SECONDS = 30
RETRY_MAX_SECONDS = 3600
# What the user said in a session, cut to this many characters, finds the older decisions it may amend (MiniLM reads
# its first 256 tokens anyway).
SAID_CHARS = 2000


@dataclass
class Finisher:
    """Everything the end of a claim needs: the database, the embedder, the run the rows belong to."""

    db: Database
    embedder: Embedder
    job_run_id: int | None = None
    clock: StageClock = field(default_factory=StageClock)
    stored_level: int = logging.DEBUG
    """The level of the one line per summarised session: `episodes serve` logs it at INFO (what it did, as it
    happens); a run's own report line counts them, so there it is for debugging."""

    def prepare(self, transcript: Transcript, prompt_version: str, *, owner: str) -> list[OpenItem] | None:
        """The items to offer, read in one round trip: the open items, then the current decisions and
        preferences (``OpenItem.standing``); None when this content was already summarised with
        ``prompt_version``: then the claim is completed here, with no model call.

        The decisions offered are the newest and, when the user has more, the older ones whose episode is
        closest to what the user said in this session (one embedding and a second read, for those users only):
        a rule amended months later is still offered. An embedder that cannot load then gives the claim back
        untouched, before any model call, and stops the run."""
        with self.db.tenant(transcript.tenant_id, pipeline=True) as conn:
            current = conn.execute(
                query("current_episode_for_content"),
                {
                    "tenant_id": transcript.tenant_id,
                    "session_id": transcript.session_id,
                    "content_hash": transcript.content_hash,
                    "prompt_version": prompt_version,
                },
            )
            scope = {
                "tenant_id": transcript.tenant_id,
                "user_id": transcript.user_id,
                "session_id": transcript.session_id,
                "before": transcript.ended_at,
            }
            items = conn.execute(query("open_items"), {**scope, "limit": MAX_OPEN_ITEMS})
            newest = {"limit": MAX_CURRENT_DECISIONS + 1, "related": 0, "query": None}  # one more: are there older?
            decisions = conn.execute(query("current_decisions"), {**scope, **newest})
            if current.fetchone() is not None:
                conn.execute(
                    query("complete_transcript"),
                    {
                        "tenant_id": transcript.tenant_id,
                        "id": transcript.id,
                        "worker": owner,
                        "content_hash": transcript.content_hash,
                    },
                )
                return None
            rows, standing = items.fetchall(), decisions.fetchall()
            standing, older = standing[:MAX_CURRENT_DECISIONS], len(standing) > MAX_CURRENT_DECISIONS
            if older and (vector := self._said(transcript, owner)) is not None:
                related = {"limit": MAX_CURRENT_DECISIONS, "related": MAX_RELATED_DECISIONS, "query": vector}
                standing = conn.execute(query("current_decisions"), {**scope, **related}).fetchall()
        return [OpenItem(r["event_id"], r["type"], r["what"], r["since"]) for r in rows + standing]

    def _said(self, transcript: Transcript, owner: str) -> Vectors | None:
        """The embedding of what the user said in the session (its first SAID_CHARS characters), None if nothing;
        an embedder that cannot load gives the claim back first."""
        said = " ".join(m.content for m in transcript.messages if m.role == "user")[:SAID_CHARS]
        if not said.strip():
            return None
        try:
            return embed_queries(self.embedder, [said])[0, :]
        except ConfigError:
            self.release(transcript, owner=owner)
            raise

    def finish(
        self,
        transcript: Transcript,
        result: ExtractionResult,
        offered: Collection[int],
        *,
        owner: str,
        offered_decisions: Collection[int] = (),
    ) -> str:
        """Ground, embed and write the episode; ``done``, or ``lost`` when ``owner`` no longer holds
        the claim (nothing is written then). ``offered``: ids of the open items the model was shown;
        ``offered_decisions``: ids of the current decisions and preferences it was shown."""
        started = time.perf_counter()
        with self.clock("ground"):
            result = self._grounded_summary(transcript, result)
            grounded = ground(result.extraction, transcript.messages, set(offered), set(offered_decisions))
        written = write_session_episode(
            self.db,
            self.embedder,
            transcript,
            result,
            grounded,
            owner=owner,
            job_run_id=self.job_run_id,
            clock=self.clock,
        )
        if written.outcome == "lost":
            log.warning(
                "lost the claim before writing; discarded",
                extra={"action": "claim_lost", "transcript_id": transcript.id},
            )
            return "lost"
        if written.outcome == "unsettled" or written.corrected is None:
            return self.fail(
                transcript,
                "the session's corrections kept changing while its episode was written",
                owner=owner,
                calls=result.calls,
            )
        corrected = written.corrected
        log.log(
            self.stored_level,
            "summarised session %s",
            transcript.session_id,
            extra={
                "action": "session_summarised",
                "tenant": transcript.tenant_id,
                "session": transcript.session_id,
                "episode_id": written.episode_id,
                "events": len(corrected.episode.key_events),
                "tokens_in": sum(c.input_tokens for c in result.calls),
                "tokens_out": sum(c.output_tokens for c in result.calls),
                "model_ms": sum(c.latency_ms for c in result.calls),
                "corrections": len(corrected.applied),
                "resolved": len(grounded.episode.resolved_items),
                "replaced": sum(e.replaces is not None for e in grounded.episode.key_events),
                "dropped_events": grounded.dropped_events,
                "ms": int((time.perf_counter() - started) * 1000),
            },
        )
        return "done"

    def _grounded_summary(self, transcript: Transcript, result: ExtractionResult) -> ExtractionResult:
        """A model's summary without its sentences that name what the transcript does not (issue 46 #15);
        raises :class:`InventedSummary` when none is left: the attempt fails, the next asks again, the last
        dead-letters. An extractor that called no model (offline) writes from the transcript itself."""
        if not result.calls:
            return result
        dates = (transcript.started_at, transcript.ended_at)
        summary, dropped = ground_summary(result.extraction.summary, transcript.messages, dates)
        if not dropped:
            return result
        if not summary.strip():
            names = ", ".join(ungrounded_names(result.extraction.summary, transcript.messages, dates)[:5])
            raise InventedSummary(
                f"{INVENTED_PREFIX} the model's summary names {names or 'things'}, not in the transcript; "
                "not stored (the next attempt asks again)",
                calls=result.calls,
            )
        log.info(
            "dropped %d summary sentence(s) naming what the transcript does not",
            dropped,
            extra={"action": "summary_grounded", "transcript_id": transcript.id, "dropped_sentences": dropped},
        )
        return replace(result, extraction=result.extraction.model_copy(update={"summary": summary}))

    def fail(
        self,
        transcript: Transcript,
        error: str,
        *,
        owner: str,
        permanent: bool = False,
        calls: Sequence[ModelCall] = (),
        backoff: bool = True,
    ) -> str:
        """Back to the queue (after an exponential backoff unless ``backoff`` is off), or to the
        dead letters when ``permanent`` or out of attempts; the calls made are recorded either way.
        Returns ``failed``, ``dead``, or ``lost`` when ``owner`` no longer held the claim."""
        settings = self.db.settings
        # The claim returned the attempt count it set (claim_transcript); no need to read it back.
        wait = min(RETRY_BASE_SECONDS * 2 ** max(transcript.attempts - 1, 0), RETRY_MAX_SECONDS) if backoff else 0
        with self.db.admin() as conn:
            row = conn.execute(
                query("fail_transcript"),
                {
                    "tenant_id": transcript.tenant_id,
                    "id": transcript.id,
                    "worker": owner,
                    "permanent": permanent,
                    "max_attempts": settings.max_attempts,
                    "backoff_seconds": wait,
                    "error": error[:2000],
                },
            ).fetchone()
            record_calls(
                conn,
                calls,
                tenant_id=transcript.tenant_id,
                user_id=transcript.user_id,
                transcript_id=transcript.id,
                job_run_id=self.job_run_id,
            )
            if row is not None and row["status"] == "pending" and wait == 0:  # due at once: wake a worker
                notify_eligible(conn, transcript.tenant_id)
        outcome = "lost" if row is None else ("dead" if row["status"] == "dead" else "failed")
        log.warning(
            "summarize failed: %s",
            error,
            extra={
                "action": "summarize_dead" if outcome == "dead" else "summarize_retry",
                "tenant": transcript.tenant_id,
                "session": transcript.session_id,
            },
        )
        return outcome

    def release(self, transcript: Transcript, *, owner: str, calls: Sequence[ModelCall] = ()) -> None:
        """Give the claim back untouched (a setting is wrong, or shutting down); model calls already
        made are kept. The transcript is due again at once, so listening workers are woken."""
        with self.db.admin() as conn:
            released = conn.execute(
                query("release_transcript"), {"tenant_id": transcript.tenant_id, "id": transcript.id, "worker": owner}
            ).fetchone()
            record_calls(
                conn,
                calls,
                tenant_id=transcript.tenant_id,
                user_id=transcript.user_id,
                transcript_id=transcript.id,
                job_run_id=self.job_run_id,
            )
            if released is not None:
                notify_eligible(conn, transcript.tenant_id)
