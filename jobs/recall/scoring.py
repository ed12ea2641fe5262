"""Scoring in PostgreSQL: every candidate of the user ranked by ``recall_scored`` (``sql/recall.sql``).

Every candidate is scored exactly (no approximate index), so the top K is exact within the user's
rows: a rank by cosine distance to the opening message (pgvector's ``<=>``) and a rank by full text
(PostgreSQL's ``ts_rank`` of the message's lexemes OR-ed over ``search_tsv``), fused by reciprocal rank
fusion, times a soft time decay and an importance factor. Only episodes above the relevance floor
(:class:`~jobs.recall.config.RecallConfig`) can be among the top K, so an opening message unrelated to
the user's history gets no "relevant" episode at all; the best below it (``related_k``, above
``related_similarity``) are picked as "possibly related". The last ``recent_n`` come along, and so do
the episodes that hold open items.

The statement reads the user's rows where they are, with the index on (tenant, user, ended_at): a
typical user's recall scores a few hundred rows in well under a millisecond, a user with 10,000
episodes in ~45 ms, and the service keeps no copy of anyone's rows (docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any, NamedTuple

import numpy as np

from jobs.db import Conn, Cursor
from jobs.embeddings.recorded import Recorded
from jobs.recall.config import RecallConfig


class Scored(NamedTuple):
    """What ``recall_scored`` returned: the chosen episodes, best first, and what comes with them."""

    candidates: int  # the user's candidate episodes scored
    recorded: Recorded | None  # the embedder the database records (None on a database without one)
    rows: list[dict[str, Any]]  # the chosen episodes: columns, ranks and scores
    vectors: dict[int, np.ndarray]  # their unit embeddings, by id (fitting's deduplication)


def send_scored(
    conn: Conn,
    sql: Callable[[str], str],
    params: dict[str, Any],
    vector: np.ndarray,
    cfg: RecallConfig,
    extra_ids: Collection[int],
) -> Cursor:
    """Send ``recall_scored`` (``conn`` may be in pipeline mode: read it with :func:`read_scored`).

    ``params``: tenant_id, user_id, now, purposes, query_text."""
    return conn.execute(
        sql("recall_scored"),
        {
            **params,
            "vector": vector,
            "dim": len(vector),
            "has_vector": bool(np.any(vector)),  # a zero vector has no direction: no distance, as no embedding
            "depth": max(cfg.rank_depth, cfg.top_k),
            "extra_ids": sorted(extra_ids),
            **{
                knob: getattr(cfg, knob)
                for knob in (
                    "top_k",
                    "related_k",
                    "recent_n",
                    "rrf_k",
                    "w_vector",
                    "w_text",
                    "decay_floor",
                    "half_life_days",
                    "w_importance",
                    "relevant_similarity",
                    "relevant_similarity_with_text",
                    "relevant_text",
                    "related_similarity",
                )
            },
        },
    )


def read_scored(cursor: Cursor) -> Scored:
    rows = cursor.fetchall()
    first = rows[0]
    candidates = int(first["candidates"])
    recorded = Recorded(first["embedder"], first["embedding_dim"]) if first["embedder"] else None
    chosen: list[dict[str, Any]] = []
    vectors: dict[int, np.ndarray] = {}
    for row in rows:
        if row["id"] is None:  # nothing chosen: only the counts came
            continue
        for column in ("candidates", "embedder", "embedding_dim"):
            del row[column]
        if (raw := row.pop("embedding")) is not None:
            vector = np.frombuffer(raw, ">f4", offset=4).astype(np.float32)  # vector_send: int16 dim, int16 unused
            norm = float(np.linalg.norm(vector))
            vectors[row["id"]] = vector / norm if norm > 0 else vector
        chosen.append(row)
    return Scored(candidates, recorded, chosen, vectors)
