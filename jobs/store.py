"""Inserting episodes (a session's or a super-summary's) with their events, lines and entities, and the
model-call rows. The write of a session episode, in its one transaction, is :mod:`jobs.summarize.write`'s.

The database enforces idempotency: a partial unique index allows one current session episode per
(tenant, session). A changed transcript or a new prompt version supersedes the old episode (kept
for audit, out of recall) instead of adding a second one; what the old episode resolved is reopened
and what it replaced stands again, for the new one to resolve or replace again.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from jobs.concepts import OPEN_ITEM_TYPES
from jobs.db import Conn, one
from jobs.models import EpisodeExtraction, Message, ModelCall, search_text
from jobs.sql import query

QUOTE_CHARS = 280


@dataclass(frozen=True)
class EpisodeLine:
    """A verbatim line of a session that its episode keeps (jobs.extract.lines, table episode_lines): the
    transcript message it is from (its index), who said it, when, and the text."""

    message_index: int
    speaker: str
    said_at: dt.datetime | None
    text: str


@dataclass(frozen=True)
class EpisodeRow:
    """Everything needed to insert one episode (session or super)."""

    tenant_id: str
    user_id: str
    kind: str
    episode: EpisodeExtraction
    started_at: dt.datetime
    ended_at: dt.datetime
    model: str
    prompt_version: str
    embedding: np.ndarray | None
    purpose: str = "general"
    transcript_id: int | None = None
    session_id: str | None = None
    content_hash: str | None = None
    period_start: dt.date | None = None
    period_end: dt.date | None = None
    calls: Sequence[ModelCall] = ()
    dropped_events: int = 0
    dropped_entities: int = 0
    lines: Sequence[EpisodeLine] = ()  # the session's lines the episode keeps (jobs.extract.lines)
    line_vectors: np.ndarray | None = None  # their embeddings, one row per line


def insert_episode(
    conn: Conn,
    row: EpisodeRow,
    *,
    messages: Sequence[Message] = (),
    source_event_ids: Sequence[int | None] | None = None,
) -> int:
    """Insert the episode with its events and entities; return its id."""
    ep = row.episode
    episode_id: int = one(
        conn.execute(
            query("insert_episode"),
            {
                "tenant_id": row.tenant_id,
                "user_id": row.user_id,
                "kind": row.kind,
                "transcript_id": row.transcript_id,
                "session_id": row.session_id,
                "purpose": row.purpose,
                "summary": ep.summary,
                "topic_tags": ep.topic_tags,
                "importance": ep.importance,
                "started_at": row.started_at,
                "ended_at": row.ended_at,
                "period_start": row.period_start,
                "period_end": row.period_end,
                "search_text": search_text(ep),
                "embedding": row.embedding,
                "model": row.model,
                "prompt_version": row.prompt_version,
                "content_hash": row.content_hash,
                "input_tokens": sum(c.input_tokens for c in row.calls),
                "output_tokens": sum(c.output_tokens for c in row.calls),
                "cache_read_tokens": sum(c.cache_read_tokens for c in row.calls),
                "cache_write_tokens": sum(c.cache_write_tokens for c in row.calls),
                "cost_usd": round(sum(c.cost_usd for c in row.calls), 6),
                "dropped_events": row.dropped_events,
                "dropped_entities": row.dropped_entities,
            },
        )
    )["id"]
    events = []
    for ordinal, event in enumerate(ep.key_events):
        first = event.evidence[0]
        msg = messages[first] if first < len(messages) else None
        when = (msg.ts if msg else None) or row.ended_at
        events.append(
            {
                "tenant_id": row.tenant_id,
                "user_id": row.user_id,
                "episode_id": episode_id,
                "ordinal": ordinal,
                "type": event.type,
                "what": event.what,
                "who": event.who,
                "due": event.due,
                "occurred_at": when,
                "evidence": event.evidence,
                "evidence_quote": (msg.content if msg else "")[:QUOTE_CHARS] or None,
                "status": "open" if event.type in OPEN_ITEM_TYPES else "n/a",
                "source_event_id": source_event_ids[ordinal] if source_event_ids else None,
            }
        )
    with conn.cursor() as cur:
        if events:
            cur.executemany(query("insert_event"), events)
        if row.lines:
            vectors = row.line_vectors
            cur.executemany(
                query("insert_line"),
                [
                    {
                        "tenant_id": row.tenant_id,
                        "user_id": row.user_id,
                        "episode_id": episode_id,
                        "ordinal": k,
                        "message_index": line.message_index,
                        "speaker": line.speaker[:200],
                        "said_at": line.said_at,
                        "text": line.text,
                        "embedding": None if vectors is None else vectors[k],
                    }
                    for k, line in enumerate(row.lines)
                ],
            )
        if ep.entities:
            cur.executemany(
                query("insert_entity"),
                [
                    {
                        "tenant_id": row.tenant_id,
                        "user_id": row.user_id,
                        "episode_id": episode_id,
                        "name": e.name,
                        "kind": e.kind,
                    }
                    for e in ep.entities
                ],
            )
    return episode_id


def record_calls(
    conn: Conn,
    calls: Sequence[ModelCall],
    *,
    tenant_id: str,
    user_id: str | None,
    transcript_id: int | None,
    job_run_id: int | None,
) -> None:
    if not calls:
        return
    with conn.cursor() as cur:
        cur.executemany(
            query("insert_model_call"),
            [
                {
                    "tenant_id": tenant_id,
                    "user_id": user_id,
                    "transcript_id": transcript_id,
                    "job_run_id": job_run_id,
                    "template": c.template,
                    "prompt_hash": c.prompt_hash,
                    "model": c.model,
                    "batch": c.batch,
                    "input_tokens": c.input_tokens,
                    "output_tokens": c.output_tokens,
                    "cache_read_tokens": c.cache_read_tokens,
                    "cache_write_tokens": c.cache_write_tokens,
                    "cost_usd": c.cost_usd,
                    "latency_ms": c.latency_ms,
                    "outcome": c.outcome,
                    "error": c.error,
                }
                for c in calls
            ],
        )
