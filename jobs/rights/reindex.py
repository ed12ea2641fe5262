"""After an episode's text changed in place: its full-text column and its vector, from what is stored now.

A session episode's vector and ``search_tsv`` are both made of its summary, tags, every event and
its entities (:func:`jobs.models.episode_text`, as the summarize job writes them). A super-summary's
``search_tsv`` covers every carried event, its vector only the first few (the compress job embeds its
at most five highlights, which come first by ordinal). The update stamps ``changed_xid`` (migration
0006), so every warm per-user recall copy reads the row again on its next recall.
"""

from __future__ import annotations

from collections.abc import Collection

from jobs.db import Conn
from jobs.embeddings import Embedder
from jobs.models import episode_text
from jobs.sql import query

SUPER_VECTOR_EVENTS = 5


def reindex_episodes(conn: Conn, tenant_id: str, ids: Collection[int], embedder: Embedder) -> None:
    """Re-embed and re-index ``ids`` (episodes of ``tenant_id``) inside the caller's transaction."""
    if not ids:
        return
    rows = conn.execute(query("episode_search_parts"), {"tenant_id": tenant_id, "ids": sorted(ids)}).fetchall()
    if not rows:
        return
    full = [episode_text(r["summary"], r["topic_tags"], r["events"], r["entities"]) for r in rows]
    vector_texts = [
        text
        if r["kind"] == "session"
        else episode_text(r["summary"], r["topic_tags"], r["events"][:SUPER_VECTOR_EVENTS], r["entities"])
        for r, text in zip(rows, full)
    ]
    vectors = embedder.embed(vector_texts)
    for row, text, vector in zip(rows, full, vectors):
        conn.execute(
            query("set_episode_search"),
            {"tenant_id": tenant_id, "id": row["id"], "search_text": text, "embedding": vector},
        )
