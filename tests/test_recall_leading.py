"""The one summary shown in full above its quotes (full_headers) is a session's, never a super-summary's (issue 47):
a super's summary covers a whole compressed period and its quotes carry their own days, so in full it took the room
of several quotes. Synthetic rows, no database: only the fitting is under test."""

from __future__ import annotations

import datetime as dt

from support.recall_rows import row

from jobs.recall import RecallConfig
from jobs.recall.fitting import select
from jobs.recall.result import RecalledLine

NOW = dt.datetime(2025, 7, 3, 10, 0, tzinfo=dt.UTC)
PERIOD = " ".join(f"In week {k} Jon and Gina talked about the studio, the store and their plans." for k in range(12))


def test_a_super_summary_that_matches_best_is_not_shown_in_full() -> None:
    start = NOW - dt.timedelta(days=120)
    super_row = {
        **row(1, start, PERIOD, 0.7, relevance_rank=1),
        "kind": "super",
        "session_id": None,
        "period_start": start.date(),
        "period_end": (start + dt.timedelta(days=30)).date(),
    }
    session = row(2, NOW - dt.timedelta(days=10), "Jon chose Marley flooring for the studio.", 0.6, relevance_rank=2)
    lines = [
        RecalledLine(1, 0, "user (Jon)", "I'm after Marley flooring, it's grippy.", 0.7, said_at=start),
        RecalledLine(2, 0, "user (Jon)", "The Marley floor goes in next week.", 0.6),
    ]
    picked, _ = select([super_row, session], {}, [], RecallConfig(full_headers=1), 400, "Which floor?", NOW, lines)
    shown = {ep.id: ep for ep in picked}
    assert shown[1].compact and shown[1].lines, "the super is shown by its header and its quotes"
    assert not shown[2].compact, "the best session leads with its summary in full"
