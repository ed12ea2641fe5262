"""Newest wins without crowding out the answer (issue 47): a later session's line alike to an older quoted line is
quoted with it, never ahead of everything else. Synthetic rows and line vectors, no database: only the fitting is
under test (jobs.recall.quotes.later_values, jobs.recall.fitting.select)."""

from __future__ import annotations

import datetime as dt

import numpy as np
from support.recall_rows import row

from jobs.recall import RecallConfig
from jobs.recall.fitting import select
from jobs.recall.quotes import LineKey
from jobs.recall.result import RecalledLine

NOW = dt.datetime(2025, 7, 3, 10, 0, tzinfo=dt.UTC)
QUESTION = "What flooring does Jon want for the studio?"
ANSWER = "Jon wants Marley flooring for the studio: grippy, but it still lets dancers move."


def _history() -> tuple[list[dict[str, object]], list[RecalledLine], dict[LineKey, np.ndarray]]:
    """Session 1 holds the answer. Sessions 2-7, later, each hold a line of small talk about the studio: alike to
    the answer (cosine 0.7 of their vectors) but far less apt to the question."""
    rows = [row(1, NOW - dt.timedelta(days=90), "Jon and Gina talked about the studio.", 0.6, relevance_rank=1)]
    lines = [RecalledLine(1, 0, "user (Jon)", ANSWER, 0.8, score=0.8, fused=0.05)]
    vectors = {(1, 0): np.asarray([1.0, 0.0, 0.0], dtype=np.float32)}
    for k in range(2, 8):
        rows.append(row(k, NOW - dt.timedelta(days=90 - 10 * k), f"Jon and Gina chatted, week {k}.", 0.3))
        lines.append(RecalledLine(k, 0, "user (Gina)", f"The studio looks great, keep going Jon! (week {k})", 0.3))
        vectors[k, 0] = np.asarray([0.7, 0.714, 0.0], dtype=np.float32)
    return rows, lines, vectors


def _quoted(budget: int) -> list[str]:
    rows, lines, vectors = _history()
    picked, _ = select(rows, {}, [], RecallConfig(), budget, QUESTION, NOW, lines, line_vectors=vectors)
    return [line.text for ep in picked for line in ep.lines]


def test_later_small_talk_alike_to_the_answer_does_not_push_the_answer_out() -> None:
    """Before issue 47's change every later line alike to a quoted one was raised above it: at a small budget the
    six lines of small talk filled the block and the answer was cut."""
    for budget in (150, 250, 400):
        assert ANSWER in _quoted(budget), budget


def test_a_later_line_as_apt_as_the_older_one_comes_with_it_at_every_budget() -> None:
    rows, lines, vectors = _history()
    later = "Change of plan: Jon now wants sprung wooden flooring for the studio, Marley is too slippery."
    rows.append(row(9, NOW - dt.timedelta(days=5), "Jon changed the studio's floor.", 0.6, relevance_rank=2))
    lines.append(RecalledLine(9, 0, "user (Jon)", later, 0.7, score=0.7))
    vectors[9, 0] = np.asarray([0.75, 0.0, 0.661], dtype=np.float32)
    for budget in range(100, 900, 25):
        picked, _ = select(rows, {}, [], RecallConfig(), budget, QUESTION, NOW, lines, line_vectors=vectors)
        quoted = [line.text for ep in picked for line in ep.lines]
        assert later in quoted or ANSWER not in quoted, (budget, quoted)


def test_the_session_holding_the_decision_that_replaced_a_relevant_one_is_relevant_too() -> None:
    """One developer's history (issue 47): the amending chat was only "possibly related" while the rule it amended
    was "relevant"; it states what holds on the same matter, so it is labelled relevant too."""
    settled = NOW - dt.timedelta(days=31)
    amended = NOW - dt.timedelta(days=1)
    rows = [
        row(1, settled, "The user decided: merge keeps the latest record.", 0.62, relevance_rank=1),
        row(2, amended, "The user decided: merge keeps the record with most fields.", 0.3, related_rank=1),
    ]
    rows[0]["replaced_on"], rows[0]["replaced_by"] = amended.date(), frozenset({2})
    picked, _ = select(rows, {}, [], RecallConfig(), 600, "Why does the merge keep duplicates?", NOW)
    shown = {ep.id: ep for ep in picked}
    assert "relevant" in shown[2].reasons, shown[2].reasons
    assert shown[1].replaced_on == amended.date()
