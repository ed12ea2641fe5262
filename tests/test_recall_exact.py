"""Recall ranks exactly: the top K by vector and by the fused score match a brute force over every row, the
floors hold, and each recall follows inserts, updates, deletions and an erased user who comes back."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from support.recall_rows import NOW, UNBOUNDED, add, episode_row, unit, words

from jobs.db import Database, one
from jobs.recall import (
    Recall,
    RecallConfig,
    Recaller,
)
from jobs.store import insert_episode

pytestmark = pytest.mark.citus  # runs on one PostgreSQL and on the Citus cluster (conftest)


# ------------------------------------------------------------------------------------------------
# Exactness
# ------------------------------------------------------------------------------------------------


@pytest.fixture
def crowd(db: Database) -> Iterator[np.random.Generator]:
    """300 episodes of acme/u1 plus neighbours (another user, another tenant with the same user id)."""
    rng = np.random.default_rng(11)
    with db.tenant("acme") as conn:
        for _ in range(300):
            insert_episode(
                conn,
                episode_row(
                    words(rng),
                    days_ago=float(rng.uniform(0, 900)),
                    vector=unit(rng),
                    importance=float(rng.uniform(0, 1)),
                ),
            )
        for i in range(40):
            insert_episode(conn, episode_row(words(rng), user="u2", days_ago=float(i), vector=unit(rng)))
    with db.tenant("other") as conn:
        for i in range(40):
            insert_episode(conn, episode_row(words(rng), tenant="other", days_ago=float(i), vector=unit(rng)))
    yield rng


def _all_rows(db: Database, text: str) -> list[dict[str, Any]]:
    """Brute force input: every candidate row of acme/u1, with PostgreSQL's own text score.

    The text score is PostgreSQL's ts_rank (normalisation 1) of the message's lexemes OR-ed, built
    the same way as in sql/recall.sql, so equal scores tie exactly as they do there.
    """
    with db.tenant("acme") as conn:
        return conn.execute(
            """SELECT id, embedding, ended_at, importance,
                      CASE WHEN search_tsv @@ q THEN ts_rank(search_tsv, q, 1)::float8 END AS text_score
               FROM episodes,
                    (SELECT string_agg('''' || lex || '''', ' | ')::tsquery AS q
                     FROM unnest(tsvector_to_array(to_tsvector('english', %s))) AS lex) tq
               WHERE user_id = 'u1' AND status = 'current' AND compressed_into IS NULL""",
            (text,),
        ).fetchall()


def _brute_force(rows: list[dict[str, Any]], query: np.ndarray, cfg: RecallConfig, k: int) -> list[int]:
    """The fused score of sql/recall.sql, recomputed in Python over all rows."""
    dist = {r["id"]: 1.0 - float(np.dot(r["embedding"].to_numpy(), query)) for r in rows}
    by_vec = sorted(dist, key=lambda i: (dist[i], i))[: cfg.rank_depth]
    matched = [r for r in rows if r["text_score"] is not None]
    by_text = [r["id"] for r in sorted(matched, key=lambda r: (-r["text_score"], r["id"]))][: cfg.rank_depth]
    vrank = {i: n + 1 for n, i in enumerate(by_vec)}
    trank = {i: n + 1 for n, i in enumerate(by_text)}
    score = {}
    for r in rows:
        if r["id"] not in vrank and r["id"] not in trank:
            continue  # beyond both lists' depth: no score
        age = max((NOW - r["ended_at"]).total_seconds(), 0) / 86400
        fused = cfg.w_vector / (cfg.rrf_k + vrank[r["id"]]) if r["id"] in vrank else 0.0
        fused += cfg.w_text / (cfg.rrf_k + trank[r["id"]]) if r["id"] in trank else 0.0
        decay = cfg.decay_floor + (1 - cfg.decay_floor) * 0.5 ** (age / cfg.half_life_days)
        score[r["id"]] = fused * decay * (1 + cfg.w_importance * (r["importance"] - 0.5))
    return sorted(score, key=lambda i: (-score[i], i))[:k]


def test_vector_top_k_is_exact(db: Database, crowd: np.random.Generator) -> None:
    cfg = RecallConfig(
        recent_n=0,
        top_k=15,
        w_text=0.0,
        decay_floor=1.0,
        w_importance=0.0,
        max_open_items=0,
        dedup_similarity=2.0,
        relevant_similarity=-1.0,
    )
    recaller = Recaller(db, config=cfg)
    rows = _all_rows(db, "x")
    matrix = np.stack([r["embedding"].to_numpy() for r in rows])
    ids = np.array([r["id"] for r in rows])
    for _ in range(5):
        query = unit(crowd)
        result = recaller.recall_vector("acme", "u1", "", query, budget_tokens=UNBOUNDED, now=NOW)
        expected = ids[np.argsort(1.0 - matrix @ query, kind="stable")[:15]]
        got = sorted(result.episodes, key=lambda ep: ep.relevance_rank or 0)
        assert [ep.id for ep in got] == list(expected)
        assert [ep.vector_rank for ep in got] == list(range(1, 16))
        assert result.candidates == 300


def _clears_floor(
    cfg: RecallConfig, distance: float | None, text: float | None, background: tuple[float, float]
) -> bool:
    """The relevance floor by brute force; ``background``: the mean and spread of every candidate's similarity."""
    if distance is None:
        return False
    mean, sd = background
    stands_out = cfg.relevant_z is not None and sd > 0 and (1 - distance - mean) / sd >= cfg.relevant_z
    return 1 - distance >= cfg.relevant_similarity or (
        1 - distance >= cfg.relevant_similarity_with_text
        and ((text is not None and text >= cfg.relevant_text) or stands_out)
    )


@pytest.mark.parametrize(("relevant", "related"), [(0.3, -1.0), (0.3, 0.1), (0.5, 0.25), (0.7, 0.1), (0.5, 0.4)])
def test_only_episodes_above_the_floor_are_relevant_and_possibly_related_ones_are_below_it(
    db: Database, crowd: np.random.Generator, relevant: float, related: float
) -> None:
    """Whatever the floor, the labels SQL gives are honest: relevant ones clear it, possibly related ones do
    not and are at least related_similarity alike, neither list is longer than asked, and with room to spare
    every ranked episode between the two thresholds is possibly related (checked against the brute force)."""
    cfg = RecallConfig(
        relevant_similarity=relevant,
        related_similarity=related,
        top_k=6,
        related_k=10,
        recent_n=2,
        max_open_items=0,
        dedup_similarity=2.0,
        rank_depth=50,
    )
    recaller = Recaller(db, config=cfg)
    rows = _all_rows(db, "x")
    vectors = np.stack([r["embedding"].to_numpy() for r in rows])
    for _ in range(4):
        # A query near a few episodes (similarities spread from ~0.2 to ~0.8), the rest near 0.
        near = crowd.choice(len(rows), 4, replace=False)
        query = (vectors[near] * crowd.uniform(0.3, 1.0, (4, 1))).sum(axis=0) + 0.3 * unit(crowd)
        query = (query / np.linalg.norm(query)).astype(np.float32)
        text = words(crowd, 3)
        result = recaller.recall_vector("acme", "u1", text, query, budget_tokens=UNBOUNDED, now=NOW)
        every = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)) @ query  # cosine, as <=>
        background = (float(every.mean()), float(every.std()))
        top = [ep for ep in result.episodes if ep.relevance_rank]
        loose = [ep for ep in result.episodes if ep.related_rank]
        assert len(top) <= cfg.top_k and len(loose) <= cfg.related_k and not {e.id for e in top} & {e.id for e in loose}
        assert all(_clears_floor(cfg, ep.distance, ep.text_score, background) for ep in top)
        assert all(not _clears_floor(cfg, ep.distance, ep.text_score, background) for ep in loose)
        assert all(ep.distance is not None and 1 - ep.distance >= related for ep in loose)
        if len(loose) < cfg.related_k:
            scored = {r["id"]: r for r in _all_rows(db, text)}
            by_vec = sorted(scored, key=lambda i: (1 - float(np.dot(scored[i]["embedding"].to_numpy(), query)), i))
            ranked = set(by_vec[: cfg.rank_depth]) | set(
                sorted(
                    (i for i in scored if scored[i]["text_score"] is not None),
                    key=lambda i: (-scored[i]["text_score"], i),
                )[: cfg.rank_depth]
            )
            between = {
                i
                for i in ranked
                if not _clears_floor(
                    cfg,
                    1 - float(np.dot(scored[i]["embedding"].to_numpy(), query)),
                    scored[i]["text_score"],
                    background,
                )
                and float(np.dot(scored[i]["embedding"].to_numpy(), query)) >= related
            }
            assert {ep.id for ep in loose} == between
        assert any(top) or relevant >= 0.7 or any(loose), "the query should make some label"


def test_hybrid_top_k_matches_brute_force(db: Database, crowd: np.random.Generator) -> None:
    cfg = RecallConfig(
        recent_n=0, top_k=12, rank_depth=30, max_open_items=0, dedup_similarity=2.0, relevant_similarity=-1.0
    )
    recaller = Recaller(db, config=cfg)
    for _ in range(8):
        query, text = unit(crowd), words(crowd, 4)
        result = recaller.recall_vector("acme", "u1", text, query, budget_tokens=UNBOUNDED, now=NOW)
        rows = _all_rows(db, text)
        got = [ep.id for ep in sorted(result.episodes, key=lambda ep: ep.relevance_rank or 0)]
        assert got == _brute_force(rows, query, cfg, 12)
        assert any(ep.text_rank for ep in result.episodes), "the text query should match something"
        by_id = {r["id"]: r for r in rows}
        for ep in result.episodes:  # the in-process scores are PostgreSQL's: ts_rank bit for bit
            assert ep.text_score == by_id[ep.id]["text_score"]
            assert ep.distance == pytest.approx(
                1.0 - float(np.dot(by_id[ep.id]["embedding"].to_numpy(), query)), abs=1e-6
            )


def _fresh(db: Database, cfg: RecallConfig, text: str, query: np.ndarray) -> list[int]:
    """The relevant episodes by rank as the brute force computes them from the rows as they are now."""
    return _brute_force(_all_rows(db, text), query, cfg, cfg.top_k)


def _relevant(result: Recall) -> list[int]:
    return [
        ep.id
        for ep in sorted((ep for ep in result.episodes if ep.relevance_rank), key=lambda ep: ep.relevance_rank or 0)
    ]


def test_recall_follows_every_kind_of_change(db: Database, crowd: np.random.Generator) -> None:
    """Insert, supersede, compress, redact-like update and delete: each recall ranks the rows as they are."""
    cfg = RecallConfig(recent_n=3, top_k=12, max_open_items=0, dedup_similarity=2.0, relevant_similarity=-1.0)
    warm = Recaller(db, config=cfg)
    query, text = unit(crowd), "budget invoice hotel"

    def check() -> list[tuple[int, int | None]]:
        result = warm.recall_vector("acme", "u1", text, query, budget_tokens=UNBOUNDED, now=NOW)
        assert _relevant(result) == _fresh(db, cfg, text, query)
        return [(ep.id, ep.relevance_rank) for ep in result.episodes]

    first = check()
    best = next(i for i, r in first if r == 1)
    new = add(db, "Budget invoice hotel budget invoice hotel.", days_ago=1.0, vector=query, importance=1.0)
    assert (new, 1) in check()  # a new episode, closest in both lists
    with db.tenant("acme") as conn:
        conn.execute("UPDATE episodes SET status = 'superseded' WHERE id = %s", (new,))
    assert new not in {i for i, _ in check()}
    with db.tenant("acme") as conn:  # compressed into a super-summary (here: any other episode)
        conn.execute("UPDATE episodes SET compressed_into = %s WHERE id = %s", (new, best))
    assert best not in {i for i, _ in check()}
    with db.tenant("acme") as conn:  # rewritten in place (as redaction does): new text, new vector
        target = one(
            conn.execute(
                "SELECT id FROM episodes WHERE user_id = 'u1' AND status = 'current' "
                "AND compressed_into IS NULL ORDER BY id DESC LIMIT 1"
            )
        )["id"]
        conn.execute(
            "UPDATE episodes SET search_tsv = to_tsvector('english', 'budget invoice hotel'), "
            "embedding = %s WHERE id = %s",
            (query, target),
        )
    assert (target, 1) in check()
    with db.tenant("acme") as conn:
        conn.execute("DELETE FROM episodes WHERE id = %s", (target,))
    assert target not in {i for i, _ in check()}


def test_a_change_committed_after_a_recall_started_is_not_missed(db: Database, crowd: np.random.Generator) -> None:
    """A transaction still open while a recall reads is not seen by it, and is by the next recall once it
    commits, as is a writer of the same user that committed meanwhile."""
    cfg = RecallConfig(recent_n=0, top_k=5, max_open_items=0, dedup_similarity=2.0, relevant_similarity=-1.0)
    warm = Recaller(db, config=cfg)
    query = unit(crowd)
    warm.recall_vector("acme", "u1", "", query, budget_tokens=UNBOUNDED, now=NOW)
    quick: list[int] = []
    with db.tenant("acme") as slow:  # still open while the next recall runs
        late = insert_episode(slow, episode_row("A late writer.", days_ago=2.0, vector=query))
        # A second writer of the user starts meanwhile.
        waiting = threading.Thread(target=lambda: quick.append(add(db, "A quick writer.", days_ago=3.0, vector=query)))
        waiting.start()
        during = warm.recall_vector("acme", "u1", "", query, budget_tokens=UNBOUNDED, now=NOW)
        assert late not in {ep.id for ep in during.episodes}
    waiting.join()
    after = warm.recall_vector("acme", "u1", "", query, budget_tokens=UNBOUNDED, now=NOW)
    ranks = {ep.id: ep.relevance_rank for ep in after.episodes}
    assert (ranks[late], ranks[quick[0]]) == (1, 2)  # the same vector: the more recent first
    assert _relevant(after) == _fresh(db, cfg, "", query)


def test_recall_follows_deletions_and_an_erased_user_who_comes_back(db: Database) -> None:
    """Deleted episodes leave the next recall; so does an erased user's whole history, and a user who comes
    back is recalled with the new history only."""
    cfg = RecallConfig(recent_n=0, top_k=50, max_open_items=0, dedup_similarity=2.0, relevant_similarity=-1.0)
    warm = Recaller(db, config=cfg)
    rng = np.random.default_rng(5)
    query = unit(rng)

    def recalled() -> set[int]:
        got = {ep.id for ep in warm.recall_vector("acme", "u1", "", query, budget_tokens=UNBOUNDED, now=NOW).episodes}
        assert got == set(_fresh(db, cfg, "", query))  # what the brute force finds in the rows
        return got

    before = [add(db, f"Episode {i} before the erasure.", days_ago=i + 1.0, vector=unit(rng)) for i in range(4)]
    assert recalled() == set(before)
    with db.tenant("acme") as conn:
        conn.execute("DELETE FROM episodes WHERE tenant_id = 'acme' AND id = %s", (before[0],))
    assert recalled() == set(before[1:])
    with db.tenant("acme") as conn:  # what `episodes forget` does to what recall reads (sql/privacy.sql)
        assert conn.execute("DELETE FROM episodes WHERE tenant_id = 'acme' AND user_id = 'u1'").rowcount == 3
    back = [add(db, f"Episode {i} after coming back.", days_ago=i + 1.0, vector=unit(rng)) for i in range(8)]
    assert recalled() == set(back)
