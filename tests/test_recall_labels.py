"""Properties of fitting: labels stay honest, the budget and the full-summary share hold.

``select`` (fitting) is a pure function of rows, so it is tested here on generated inputs; the picking
in SQL (sql/recall.sql recall_scored) is tested through a real database in tests/test_recall.py.
"""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.recall import RecallConfig
from jobs.recall.fitting import select
from jobs.recall.result import RecalledOpenItem, line_macros, render_block
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
