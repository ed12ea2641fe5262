"""Episodes for the recall tests, written straight through the store: a row of any kind, age, purpose and
events and lines (episode_row, add), random unit vectors and random words (unit, words), the tests' clock (NOW) and a
budget nothing exceeds (UNBOUNDED); and a candidate row as fitting reads it (row)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import numpy as np

from jobs.concepts import EventType
from jobs.db import Database
from jobs.embeddings import Embedder
from jobs.models import EpisodeExtraction, KeyEvent
from jobs.store import EpisodeLine, EpisodeRow, insert_episode

NOW = dt.datetime(2025, 6, 1, 12, 0, tzinfo=dt.UTC)
WORDS = (
    "budget invoice travel hotel python postgres garden piano marathon refund contract kitchen "
    "museum adoption pottery visa deadline roadmap webinar salary"
).split()
UNBOUNDED = 1_000_000


def episode_row(
    summary: str,
    *,
    tenant: str = "acme",
    user: str = "u1",
    days_ago: float = 10.0,
    vector: np.ndarray | None = None,
    embedder: Embedder | None = None,
    purpose: str = "general",
    events: Sequence[tuple[EventType, str]] = (),
    importance: float = 0.5,
    kind: str = "session",
    period: tuple[dt.date, dt.date] | None = None,
    lines: Sequence[str] = (),
    line_vectors: np.ndarray | None = None,
) -> EpisodeRow:
    ended = NOW - dt.timedelta(days=days_ago)
    episode = EpisodeExtraction(
        summary=summary,
        topic_tags=[],
        importance=importance,
        key_events=[KeyEvent(type=t, what=w, evidence=[0], who="user") for t, w in events],
    )
    if vector is None and embedder is not None:
        vector = embedder.embed([summary])[0]
    if lines and line_vectors is None and embedder is not None:
        line_vectors = embedder.embed(list(lines))
    return EpisodeRow(
        tenant_id=tenant,
        user_id=user,
        kind=kind,
        episode=episode,
        started_at=ended,
        ended_at=ended,
        model="test",
        prompt_version="t1",
        embedding=vector,
        purpose=purpose,
        session_id=None if kind == "super" else f"{tenant}-{user}-{summary[:20]}-{days_ago}",
        period_start=period[0] if period else None,
        period_end=period[1] if period else None,
        lines=[EpisodeLine(k, "user", ended, text) for k, text in enumerate(lines)],
        line_vectors=line_vectors,
    )


def add(db: Database, summary: str, **kwargs: object) -> int:
    """Insert one episode through the store, as its tenant; return its id."""
    row = episode_row(summary, **kwargs)  # type: ignore[arg-type]
    with db.tenant(row.tenant_id) as conn:
        return insert_episode(conn, row)


def unit(rng: np.random.Generator) -> np.ndarray:
    v = rng.standard_normal(384).astype(np.float32)
    return v / np.linalg.norm(v)


def words(rng: np.random.Generator, n: int = 8) -> str:
    return " ".join(rng.choice(WORDS, n)).capitalize() + "."


def row(i: int, when: dt.datetime, summary: str, similarity: float, **ranks: Any) -> dict[str, Any]:
    """A candidate episode as the recall query hands it to jobs.recall.fitting.select (no database)."""
    return {
        "id": i,
        "kind": "session",
        "session_id": f"s{i}",
        "purpose": "general",
        "summary": summary,
        "topic_tags": ["merge rule"],
        "importance": 0.5,
        "started_at": when,
        "ended_at": when + dt.timedelta(minutes=5),
        "period_start": None,
        "period_end": None,
        "score": 0.1,
        "distance": 1.0 - similarity,
        "text_score": None,
        "vector_rank": i,
        "text_rank": None,
        "relevance_rank": ranks.get("relevance_rank"),
        "related_rank": ranks.get("related_rank"),
        "recency_rank": ranks.get("recency_rank"),
        "replaced_on": ranks.get("replaced_on"),
        "replaced_by": ranks.get("replaced_by"),
    }


# Seven sessions of one user, days ago and summary: the recall tests' ordinary history.
HISTORY = [
    (400, "The user planned a hiking trip to the Dolomites in September and asked about mountain huts."),
    (300, "The user compared three accounting tools for her bakery and chose Xero for invoicing."),
    (200, "The user asked how to repot a fiddle-leaf fig whose leaves were turning brown."),
    (30, "The user debugged a failing Python unit test caused by timezone-naive datetimes."),
    (20, "The user drafted a cover letter for a data analyst job at a logistics company."),
    (10, "The user asked for a vegetarian lasagna recipe for eight guests."),
    (5, "The user set up a weekly running plan to prepare for a half marathon in October."),
]
