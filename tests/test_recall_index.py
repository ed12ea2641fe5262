"""A heavy user's recall through the HNSW indexes (migration 0040; sql/recall.sql, RecallConfig.index_above):
the same top episodes and lines as the exact scoring, a per-user filter that never returns too few rows, the
switch at the threshold, and `episodes reembed` moving the indexes to the new dimension."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.lifecycle_helpers import load, rows, session
from support.recall_rows import NOW, UNBOUNDED, episode_row, unit, words

from jobs.db import Database
from jobs.embeddings import Embedder, HashingEmbedder
from jobs.lifecycle.reembed import reembed
from jobs.recall import Recall, RecallConfig, Recaller, scoring
from jobs.store import insert_episode

pytestmark = pytest.mark.citus  # runs on one PostgreSQL and on the Citus cluster (conftest)

EXACT = 10**9  # index_above no user reaches: every candidate scored exactly
# Random vectors are barely similar to anything: no floor, so the top episodes and their lines are shown.
LOOSE = RecallConfig(max_open_items=0, relevant_similarity=-1.0, line_similarity=-1.0, relevant_line_similarity=-1.0)


def _insert(db: Database, tenant: str, episodes: list[tuple[str, int]], rng: np.random.Generator) -> None:
    """(user, lines) episodes of ``tenant``, random vectors and words, a day apart."""
    with db.tenant(tenant) as conn:
        for k, (user, n_lines) in enumerate(episodes):
            lines = [words(rng, 10) for _ in range(n_lines)]
            vectors = np.stack([unit(rng) for _ in lines]) if lines else None
            insert_episode(
                conn,
                episode_row(
                    words(rng),
                    tenant=tenant,
                    user=user,
                    days_ago=1.0 + k,
                    vector=unit(rng),
                    importance=float(rng.uniform(0, 1)),
                    lines=lines,
                    line_vectors=vectors,
                ),
            )


@pytest.fixture
def heavy(db: Database) -> Iterator[np.random.Generator]:
    """acme/u1 with 300 episodes of 3 lines each, beside another user and another tenant."""
    rng = np.random.default_rng(47)
    _insert(db, "acme", [("u1", 3)] * 300 + [("u2", 2)] * 60, rng)
    _insert(db, "other", [("u1", 2)] * 60, rng)
    yield rng


def _seen(result: Recall) -> list[tuple[Any, ...]]:
    return [(e.id, e.relevance_rank, e.related_rank, e.vector_rank, e.text_rank) for e in result.episodes]


def _quotes(result: Recall) -> list[tuple[int, str]]:
    return [(e.id, line.text) for e in result.episodes for line in e.lines]


def test_the_index_path_returns_the_exact_top_episodes_and_lines(db: Database, heavy: np.random.Generator) -> None:
    """On a user big enough to take it (index_above lowered below 300), with every candidate within reach of the
    text side, the index path picks, ranks and quotes what the exact scoring does."""
    base = dataclasses.replace(LOOSE, line_episodes=1000)
    exact = Recaller(db, config=dataclasses.replace(base, index_above=EXACT))
    indexed = Recaller(
        db, config=dataclasses.replace(base, index_above=100, index_text_rows=1000, index_text_lines=2000)
    )
    for _ in range(5):
        query, text = unit(heavy), words(heavy, 4)
        want = exact.recall_vector("acme", "u1", text, query, budget_tokens=UNBOUNDED, now=NOW)
        got = indexed.recall_vector("acme", "u1", text, query, budget_tokens=UNBOUNDED, now=NOW)
        assert _seen(got) == _seen(want)
        assert _quotes(got) == _quotes(want)
        assert any(e.relevance_rank for e in got.episodes) and _quotes(got)


@pytest.fixture
def few_among_many(db: Database) -> Iterator[np.random.Generator]:
    """acme/u1 holds 120 of 1,720 episodes (7 %) and 240 of 1,840 lines."""
    rng = np.random.default_rng(5)
    mix = [("u1", 2)] * 120 + [(f"u{2 + k % 20}", 1) for k in range(1600)]
    order = rng.permutation(len(mix))
    _insert(db, "acme", [mix[i] for i in order], rng)
    yield rng


def _explain(conn: Any, statement: str, params: dict[str, Any]) -> str:
    return "\n".join(r["QUERY PLAN"] for r in conn.execute("EXPLAIN " + statement, params).fetchall())


def test_a_per_user_filter_never_returns_too_few_rows(db: Database, few_among_many: np.random.Generator) -> None:
    """The HNSW scan is filtered to one user whose rows are a small share of the index: it goes on until it has
    as many as asked (iterative scan), so the vector list holds rank_depth episodes and the line search its
    line_depth lines, nearly all of them the exact nearest (an approximate index, measured: >= 0.9). The table
    is small, so sequential scans and sorts are turned off for the planner to take the indexes, as it does at scale."""
    rng = few_among_many
    cfg = RecallConfig(index_above=50, rank_depth=60, recent_n=0, line_depth=40, max_lines=40)
    vectors = {
        r["id"]: r["embedding"].to_numpy()
        for r in rows(db, "SELECT id, embedding FROM episodes WHERE tenant_id = 'acme' AND user_id = 'u1'")
    }
    ids = np.array(list(vectors))
    matrix = np.stack(list(vectors.values()))
    params = {"tenant_id": "acme", "user_id": "u1", "now": NOW, "purposes": None, "query_text": ""}
    for _ in range(3):
        query = unit(rng)
        with db.tenant_read("acme") as (conn, sql, _):
            conn.execute("SET LOCAL enable_seqscan = off")
            conn.execute("SET LOCAL enable_sort = off")
            scored = scoring.read_scores(scoring.send_scores(conn, sql, params, query, cfg, []))
            lines = scoring.send_lines(conn, sql, params, query, cfg).fetchall()
            plans = [
                _explain(conn, sql("recall_scores"), {**params, **_score_params(query, cfg)}),
                _explain(conn, sql("recall_lines").replace("{dim}", "384"), {**params, **_line_params(query, cfg)}),
            ]
        assert "episodes_embedding_hnsw" in plans[0] and "episode_lines_embedding_hnsw_384" in plans[1]
        assert len(scored.scores.ids) == 60 and not np.isnan(scored.scores.distance).any()
        nearest = set(ids[np.argsort(1.0 - matrix @ query, kind="stable")[:60]].tolist())
        assert len(nearest & set(scored.scores.ids.tolist())) >= 54
        assert len(lines) == 40 and {r["episode_id"] for r in lines} <= set(vectors)


def _score_params(query: np.ndarray, cfg: RecallConfig) -> dict[str, Any]:
    return {
        "vector": query,
        "dim": 384,
        "has_vector": True,
        "depth": cfg.rank_depth,
        "recent_n": cfg.recent_n,
        "extra_ids": [],
        "index_above": cfg.index_above,
        "text_rows": cfg.index_text_rows,
    }


def _line_params(query: np.ndarray, cfg: RecallConfig) -> dict[str, Any]:
    return {
        "vector": query,
        "dim": 384,
        "has_vector": True,
        "index_above": cfg.index_above,
        "text_lines": cfg.index_text_lines,
        "limit": cfg.max_lines,
        "neighbour": cfg.line_neighbour,
        "depth": cfg.line_depth,
        "line_episodes": cfg.line_episodes,
        "rrf_k": cfg.line_rrf_k,
        "w_vector": cfg.w_vector,
        "w_text": cfg.line_w_text,
    }


def test_the_threshold_switches_between_exact_scoring_and_the_index(db: Database, heavy: np.random.Generator) -> None:
    """With no query vector the index path's text list holds only the index_text_rows most recent matches (one
    here); the exact path ranks every match. A user of 300 episodes takes the index above 299, not at 300."""
    cfg = RecallConfig(index_text_rows=1, recent_n=0)
    zero = np.zeros(384, np.float32)
    text = " ".join(sorted(set(words(heavy, 30).rstrip(".").lower().split())))
    params = {"tenant_id": "acme", "user_id": "u1", "now": NOW, "purposes": None, "query_text": text}

    def text_scored(index_above: int) -> int:
        with db.tenant_read("acme") as (conn, sql, _):
            cur = scoring.send_scores(conn, sql, params, zero, dataclasses.replace(cfg, index_above=index_above), [])
            scored = scoring.read_scores(cur)
        return int(np.count_nonzero(~np.isnan(scored.scores.text)))

    assert text_scored(300) == cfg.rank_depth  # exact: every match ranked, the first rank_depth returned
    assert text_scored(299) == 1


def test_reembed_moves_the_indexes_to_the_new_dimension(db: Database, tmp_path: Path, embedder: Embedder) -> None:
    """The switch drops the episodes' index with the old column and the lines change dimension: after
    `episodes reembed` both indexes exist for the new dimension, and a heavy user's recall through them answers
    as the exact scoring does."""
    load(db, tmp_path, [session(i) for i in range(8)], embedder)

    def indexes() -> set[str]:
        found = rows(db, "SELECT indexname FROM pg_indexes WHERE indexname LIKE '%%embedding_hnsw%%'")
        return {r["indexname"] for r in found}

    assert indexes() == {"episodes_embedding_hnsw", f"episode_lines_embedding_hnsw_{embedder.dim}"}
    reembed(db, HashingEmbedder(64), "hashing:64", batch_size=3)
    assert indexes() == {"episodes_embedding_hnsw", "episode_lines_embedding_hnsw_64"}
    question = "Does the Snowflake renewal include SSO?"
    exact = dataclasses.replace(LOOSE, index_above=EXACT)
    want = Recaller(db, HashingEmbedder(64), config=exact).recall("acme", "u1", question)
    got = Recaller(db, HashingEmbedder(64), config=dataclasses.replace(LOOSE, index_above=0)).recall(
        "acme", "u1", question
    )
    assert _seen(got) == _seen(want) and _quotes(got) == _quotes(want)
    assert any(e.relevance_rank for e in got.episodes) and _quotes(got)
