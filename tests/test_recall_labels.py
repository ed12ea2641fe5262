"""Properties of picking and fitting: labels stay honest, the budget and the full-summary share hold.

``fuse`` (scoring) and ``select`` (fitting) are pure functions of arrays and rows, so they are tested
here on generated inputs; tests/test_recall_selection.py covers them through a real database.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.recall import RecallConfig
from jobs.recall.fitting import select
from jobs.recall.result import RecalledOpenItem, line_macros, render_block
from jobs.recall.scoring import Scores, epoch_us, fuse
from jobs.tokens import estimate_tokens

NOW = dt.datetime(2025, 6, 1, 12, 0, tzinfo=dt.UTC)
SENTENCES = (
    "The user planned a trip to Lisbon.",
    "She compared three accounting tools and chose Xero.",
    "They talked about a half marathon in October.",
    "The agent promised to send the pricing sheet.",
    "A long discussion of the garden, the piano lessons and the new kitchen followed.",
)


@st.composite
def scored(draw: st.DrawFn) -> tuple[Scores, RecallConfig]:
    """A user's candidates with arbitrary similarities and text scores, and a config with any floor."""
    n = draw(st.integers(1, 40))
    sims = draw(st.lists(st.floats(-1.0, 1.0), min_size=n, max_size=n))
    texts = draw(st.lists(st.one_of(st.just(float("nan")), st.floats(0.0, 0.1)), min_size=n, max_size=n))
    ages = draw(st.lists(st.integers(0, 2_000), min_size=n, max_size=n))
    cfg = RecallConfig(
        top_k=draw(st.integers(0, 8)),
        related_k=draw(st.integers(0, 12)),
        recent_n=draw(st.integers(0, 4)),
        relevant_similarity=draw(st.sampled_from([0.3, 0.5, 0.7])),
        related_similarity=draw(st.sampled_from([-1.0, 0.1, 0.25, 0.4])),
    )
    now_us = epoch_us(NOW)
    scores = Scores(
        ids=np.arange(1, n + 1, dtype=np.int64),
        ended_us=np.array([now_us - a * 86_400_000_000 for a in ages], np.int64),
        importance=np.full(n, 0.5),
        distance=1.0 - np.array(sims),
        text=np.array(texts),
        pinned=np.zeros(n, bool),
    )
    return scores, cfg


def _clears_floor(cfg: RecallConfig, similarity: float, text: float) -> bool:
    return similarity >= cfg.relevant_similarity or (
        similarity >= cfg.relevant_similarity_with_text and not np.isnan(text) and text >= cfg.relevant_text
    )


@settings(max_examples=200, deadline=None)
@given(scored())
def test_only_episodes_above_the_floor_are_relevant_and_possibly_related_ones_are_below_it(
    case: tuple[Scores, RecallConfig],
) -> None:
    scores, cfg = case
    picked = fuse(scores, cfg, epoch_us(NOW), set())
    by_id = {int(i): k for k, i in enumerate(scores.ids)}
    relevant = [i for i, p in picked.items() if p["relevance_rank"]]
    related = [i for i, p in picked.items() if p["related_rank"]]
    assert len(relevant) <= cfg.top_k and len(related) <= cfg.related_k
    assert not set(relevant) & set(related)
    for i in relevant:
        k = by_id[i]
        assert _clears_floor(cfg, 1.0 - scores.distance[k], scores.text[k])
    for i in related:
        k = by_id[i]
        assert not _clears_floor(cfg, 1.0 - scores.distance[k], scores.text[k])
        assert 1.0 - scores.distance[k] >= cfg.related_similarity
    # with room to spare, every episode below the floor but above related_similarity is possibly related
    below = {
        int(i)
        for k, i in enumerate(scores.ids)
        if not _clears_floor(cfg, 1.0 - scores.distance[k], scores.text[k])
        and 1.0 - scores.distance[k] >= cfg.related_similarity
    }
    if len(related) < cfg.related_k:
        assert set(related) == below


@st.composite
def rows(draw: st.DrawFn) -> tuple[list[dict[str, object]], list[RecalledOpenItem], RecallConfig, int]:
    """Rows as Recaller passes them to select(), with any mix of relevant, possibly related and recent."""
    n = draw(st.integers(0, 25))
    out: list[dict[str, object]] = []
    relevance = related = recency = 0
    for i in range(1, n + 1):
        role = draw(st.sampled_from(["relevant", "related", "recent", "relevant+recent", "related+recent"]))
        summary = " ".join(draw(st.lists(st.sampled_from(SENTENCES), min_size=1, max_size=8)))
        when = NOW - dt.timedelta(days=draw(st.integers(1, 900)))
        relevance += "relevant" in role
        related += "related" in role
        recency += "recent" in role
        out.append(
            {
                "id": i,
                "kind": "session",
                "session_id": f"s{i}",
                "purpose": "general",
                "summary": summary,
                "topic_tags": draw(st.lists(st.sampled_from(["travel", "billing", "garden"]), max_size=3)),
                "importance": 0.5,
                "started_at": when,
                "ended_at": when,
                "period_start": None,
                "period_end": None,
                "score": 0.1,
                "distance": 0.5,
                "text_score": None,
                "vector_rank": i,
                "text_rank": None,
                "relevance_rank": relevance if "relevant" in role else None,
                "related_rank": related if "related" in role else None,
                "recency_rank": recency if "recent" in role else None,
            }
        )
    items = [
        RecalledOpenItem(
            100 + k,
            draw(st.integers(1, max(n, 1))),
            "commitment",
            "Send the pricing sheet.",
            "agent",
            None,
            NOW - dt.timedelta(days=3),
        )
        for k in range(draw(st.integers(0, 3)))
    ]
    cfg = RecallConfig(full_share=draw(st.sampled_from([0.0, 0.3, 0.8, 1.0])), compact_chars=draw(st.integers(40, 200)))
    return out, items, cfg, draw(st.integers(0, 2_000))


@pytest.mark.slow  # 300 hypothesis examples (~30 s)
@settings(max_examples=300, deadline=None)
@given(rows())
def test_the_block_fits_its_budget_full_summaries_keep_their_share_and_labels_are_honest(
    case: tuple[list[dict[str, object]], list[RecalledOpenItem], RecallConfig, int],
) -> None:
    out, items, cfg, budget = case
    nothing_relevant = not any(r["relevance_rank"] for r in out)
    episodes, shown_items = select(out, {}, items, cfg, budget, "pricing sheet for the Lisbon trip", NOW)
    block = render_block(NOW, episodes, shown_items, nothing_relevant)
    assert estimate_tokens(block) <= budget or not (episodes or shown_items)
    by_id = {r["id"]: r for r in out}
    for ep in episodes:
        row = by_id[ep.id]
        assert ("relevant" in ep.reasons) == (row["relevance_rank"] is not None)
        assert ("possibly related" in ep.reasons) == (row["related_rank"] is not None)
        assert ("recent" in ep.reasons) == (row["recency_rank"] is not None)
    full = sum(len(line_macros().episode_line(ep)) + 1 for ep in episodes if not ep.compact)
    assert full <= cfg.full_share * 4 * budget  # full summaries stay within their share of the budget
    if nothing_relevant:
        assert "clearly relates to the opening message" in block or not (episodes or shown_items)


def _background(best: float, mean: float, sd: float, n: int = 60) -> Scores:
    """One candidate ``best`` similar to the opening message among ``n - 1`` others around ``mean``; the summary
    row's mean and spread are those of all ``n`` (as recall_scores computes them)."""
    rng = np.random.default_rng(7)
    sims = np.concatenate([[best], np.clip(rng.normal(mean, sd, n - 1), -1.0, best - 0.05)])
    now_us = epoch_us(NOW)
    return Scores(
        ids=np.arange(1, n + 1, dtype=np.int64),
        ended_us=np.full(n, now_us - 86_400_000_000, np.int64),
        importance=np.full(n, 0.5),
        distance=1.0 - sims,
        text=np.full(n, np.nan),
        pinned=np.zeros(n, bool),
        sim_mean=float(sims.mean()),
        sim_sd=float(sims.std()),
    )


def test_a_match_under_the_floor_that_stands_out_of_the_user_background_is_relevant() -> None:
    """A 90-word bug report is less similar to everything (one developer's history, issue 47): its own chat at 0.48,
    the user's other sessions around 0.18, is relevant; at 0.48 among others around 0.40 it is not, nor at 0.33."""
    cfg = RecallConfig()
    stands_out = fuse(_background(0.48, 0.18, 0.08), cfg, epoch_us(NOW), set())
    assert stands_out[1]["relevance_rank"] == 1
    among_alike = fuse(_background(0.48, 0.40, 0.05), cfg, epoch_us(NOW), set())
    assert among_alike[1]["relevance_rank"] is None and among_alike[1]["related_rank"] == 1
    too_far = fuse(_background(0.33, 0.05, 0.05), cfg, epoch_us(NOW), set())
    assert too_far[1]["relevance_rank"] is None, "under relevant_similarity_with_text however far it stands out"
    off = fuse(_background(0.48, 0.18, 0.08), RecallConfig(relevant_z=None), epoch_us(NOW), set())
    assert off[1]["relevance_rank"] is None
