"""The best-matching episode leads with its full summary above its quotes (RecallConfig.full_headers, issue 36);
the others keep a short header. Synthetic rows, no database: only the fitting is under test."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

from support.recall_rows import row

from jobs.recall import RecallConfig
from jobs.recall.fitting import select
from jobs.recall.result import RecalledLine

NOW = dt.datetime(2025, 7, 3, 10, 0, tzinfo=dt.UTC)
BEST = (
    "On 2 June 2025, the user decided: overage bills in blocks of 50 units, rounded up, after 25 free units; "
    "the user and the assistant talked about overage, blocks and allowance."
)


def history() -> tuple[list[dict[str, object]], list[RecalledLine]]:
    rows = [
        row(1, NOW - dt.timedelta(days=30), BEST, 0.6, relevance_rank=1),
        row(
            2,
            NOW - dt.timedelta(days=60),
            "On 4 May 2025, the user and the assistant talked about " * 3,
            0.5,
            relevance_rank=2,
        ),
    ]
    lines = [
        RecalledLine(ep, k, "user", f"line {k} of session {ep} about overage billing", 0.5)
        for ep in (1, 2)
        for k in range(3)
    ]
    return rows, lines


def test_the_best_episode_shows_its_full_summary_above_its_quotes() -> None:
    rows, lines = history()
    picked = {ep.id: ep for ep in select(rows, {}, [], RecallConfig(), 600, "How is overage billed?", NOW, lines)[0]}
    assert not picked[1].compact and picked[1].lines, "the decision it led with is in the block, quotes below"
    assert picked[2].compact and len(picked[2].compact_text) <= RecallConfig().header_chars
    none = {
        ep.id: ep
        for ep in select(
            rows, {}, [], replace(RecallConfig(), full_headers=0), 600, "How is overage billed?", NOW, lines
        )[0]
    }
    assert none[1].compact and BEST not in none[1].compact_text
