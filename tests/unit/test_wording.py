"""Counts in plain English (issue 31: "1 transcripts", "1 super-summaries")."""

from __future__ import annotations

from jobs.wording import counted, plural


def test_one_is_singular_and_the_rest_plural() -> None:
    assert counted(1, "transcript") == "1 transcript"
    assert counted(0, "transcript") == "0 transcripts"
    assert counted(1, "super-summary") == "1 super-summary"
    assert counted(2, "super-summary") == "2 super-summaries"
    assert counted(3, "entity") == "3 entities"
    assert counted(2, "day") == "2 days"
    assert counted(2, "bad line") == "2 bad lines"
    assert counted(2, "batch") == "2 batches"
    assert counted(1_000, "model call") == "1,000 model calls"
    assert counted(2, "person", "people") == "2 people"
    assert plural("summarised transcript") == "summarised transcripts"
