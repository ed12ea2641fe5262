"""Whose lines recall searches (issue 47, cost under load): the lines of the user's ``line_episodes`` candidates
closest to the opening message and the ``line_episodes`` best by its words, taken from the rows ``recall_scores``
returned, so a heavy user's episodes are scored once and not again for their lines. Real PostgreSQL, real MiniLM
for the words; random unit vectors where the distances must be known."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from support.recall_rows import NOW, add, unit

from jobs.db import Database
from jobs.embeddings import Embedder
from jobs.recall import Recaller
from jobs.recall.config import RecallConfig
from jobs.recall.scoring import line_episodes, read_scores, send_scores

pytestmark = pytest.mark.usefixtures("db")

QUESTION = "Which port does the billing gateway listen on?"


def _exact_choice(db: Database, query: np.ndarray, k: int) -> set[int]:
    """The same choice made over every candidate of u1 in one plain query (the oracle): the k closest (those
    without an embedding last, ties by id) and the k best by the message's words (ties by id)."""
    with db.tenant("acme") as conn:
        rows = conn.execute(
            """
            WITH q AS (SELECT %(v)s::vector AS vec,
                              to_tsquery('english', 'port | bill | gateway | listen') AS tsq),
            s AS (SELECT e.id, e.embedding <=> q.vec AS distance,
                         CASE WHEN e.search_tsv @@ q.tsq THEN ts_rank(e.search_tsv, q.tsq, 1) END AS text_score
                  FROM episodes e CROSS JOIN q
                  WHERE e.tenant_id = 'acme' AND e.user_id = 'u1' AND e.status = 'current'
                    AND e.compressed_into IS NULL AND e.ended_at <= %(now)s)
            (SELECT id FROM s ORDER BY distance NULLS LAST, id LIMIT %(k)s)
            UNION
            (SELECT id FROM s WHERE text_score IS NOT NULL ORDER BY text_score DESC, id LIMIT %(k)s)
            """,
            {"v": query, "now": NOW, "k": k},
        ).fetchall()
    return {r["id"] for r in rows}


def _chosen(db: Database, query: np.ndarray, cfg: RecallConfig) -> set[int]:
    params = {"tenant_id": "acme", "user_id": "u1", "now": NOW, "purposes": None, "query_text": QUESTION}
    with db.tenant_read("acme") as (conn, sql, _):
        scored = read_scores(send_scores(conn, sql, params, query, cfg, set()))
    return set(line_episodes(scored.lines, cfg))


def test_the_searched_episodes_are_the_closest_and_the_wordiest_of_every_candidate(db: Database) -> None:
    """Thirty episodes, a few holding the message's words, two without an embedding, one not ended yet: the
    episodes whose lines are searched are exactly those one query over every candidate picks, at several bounds
    (below the fusion depth, at it, above it, and above the user's candidates)."""
    rng = np.random.default_rng(11)
    query = unit(rng)
    for k in range(30):
        topic = "The billing gateway listens on port 8443." if k % 7 == 0 else "Notes on the garden and the piano."
        vector = None if k in (3, 17) else (0.4 * query + unit(rng)) / 1.1
        add(db, f"{topic} Session {k}.", vector=vector, days_ago=1 + k)
    add(db, "The billing gateway port moved, said in a session that ends tomorrow.", vector=query, days_ago=-1)
    for bound in (4, 12, 50, 60):
        cfg = dataclasses.replace(RecallConfig(), line_episodes=bound, rank_depth=8)
        assert _chosen(db, query, cfg) == _exact_choice(db, query, bound), bound
    assert len(_chosen(db, query, dataclasses.replace(RecallConfig(), line_episodes=60))) == 30


def test_a_heavy_users_far_episode_is_searched_when_its_words_match(db: Database, embedder: Embedder) -> None:
    """Twelve episodes closer by embedding than the one that says the port, with line_episodes 3: that one is
    not among the closest, its summary's words bring its lines in, and its line is quoted."""
    rng = np.random.default_rng(5)
    query = unit(rng)
    for k in range(12):
        add(
            db,
            f"Garden notes {k}.",
            vector=(0.8 * query + 0.6 * unit(rng)),
            days_ago=2 + k,
            lines=[f"Water the tomatoes on day {k}."],
            line_vectors=(0.5 * query + 0.87 * unit(rng))[None, :],
        )
    needle = "The billing gateway listens on port 8443 behind the load balancer."
    add(
        db,
        "Infrastructure notes on the billing gateway.",
        vector=unit(rng),
        days_ago=60,
        lines=[needle],
        line_vectors=(0.3 * query + 0.95 * unit(rng))[None, :],
    )
    cfg = dataclasses.replace(RecallConfig(), line_episodes=3)
    result = Recaller(db, embedder, cfg).recall_vector("acme", "u1", QUESTION, query, budget_tokens=400, now=NOW)
    assert needle in {line.text for ep in result.episodes for line in ep.lines}, result.render()


def test_an_episode_without_an_embedding_has_its_lines_searched(db: Database, embedder: Embedder) -> None:
    """An episode stored without an embedding (between `episodes reembed`'s switch and its rewrite) is still one
    of a small user's candidates: its lines are searched and the one that answers is quoted."""
    for days, summary in ((5, "The user planned a trip to Lisbon."), (9, "The user compared two running shoes.")):
        add(db, summary, embedder=embedder, days_ago=days, lines=[summary])
    needle = "The billing gateway listens on port 8443 behind the load balancer."
    add(
        db,
        "Infrastructure notes.",
        vector=None,
        embedder=None,
        days_ago=40,
        lines=[needle],
        line_vectors=embedder.embed([needle]),
    )
    result = Recaller(db, embedder).recall("acme", "u1", QUESTION, now=NOW)
    assert needle in {line.text for ep in result.episodes for line in ep.lines}, result.render()


def test_a_lines_words_stay_in_its_row(db: Database, embedder: Embedder) -> None:
    """A line of 900 characters with its embedding and lexemes is a row of over 2 kB; migration 0040 keeps it
    whole (toast_tuple_target), so recall's text match and rank read the row, not the TOAST relation (before it,
    a heavy user's line search read 26,410 buffers for 6,092 lines, docs/benchmarks.md)."""
    words = "deploy window staging cluster gateway quota billing port ingest bucket rollback canary".split()
    long_line = " ".join(f"{words[k % len(words)]}{k}" for k in range(110))[:900]
    add(db, "Infrastructure notes.", embedder=embedder, days_ago=3, lines=[long_line])
    with db.tenant("acme") as conn:
        row = conn.execute(
            "SELECT pg_column_size(l.*) AS row_bytes, pg_relation_size(c.reltoastrelid) AS toast_bytes "
            "FROM episode_lines l, pg_class c WHERE c.oid = 'episode_lines'::regclass"
        ).fetchone()
    assert row is not None and row["row_bytes"] > 2100, row  # over the default's ~2 kB
    assert row["toast_bytes"] == 0, row
