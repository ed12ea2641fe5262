"""Fitting the block where a decision was replaced (issue 36): the episode holding the replacing decision is
shown in full, its summary stating the decision that holds, and its lines rank as if it were as close to the
opening message as the episode it replaced; the replaced one stays marked. Synthetic rows, no database: the
ranks come from recall (unchanged), only the fitting is under test."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from typing import Any

from support.recall_rows import row

from jobs.recall import RecallConfig
from jobs.recall.fitting import _episode, _replacing, select
from jobs.recall.result import RecalledLine

NOW = dt.datetime(2025, 7, 3, 10, 0, tzinfo=dt.UTC)
# The room these cases were written for: quotes within 80 % of the budget, the recent episodes' lines reserved
# first (the defaults before issue 47); the promotion under test does not depend on them.
CONFIG = replace(RecallConfig(), full_share=0.8, quote_share=0.8, reserve_recent=True)
SETTLED = dt.datetime(2025, 6, 2, 10, 0, tzinfo=dt.UTC)
AMENDED = dt.datetime(2025, 7, 2, 10, 0, tzinfo=dt.UTC)


OLD_RULE = "On 2 June 2025, the user decided: merge keeps the latest record on a collision."
NEW_RULE = "On 2 July 2025, the user decided: merge keeps the record with the most filled fields; a tie keeps ours."


def history() -> list[dict[str, Any]]:
    """The settled rule (relevant, marked replaced), its amendment a month later (only loosely similar, as an
    amendment that talks about an incident is), and an unrelated session of the amendment's day."""
    return [
        row(1, SETTLED, OLD_RULE, 0.62, relevance_rank=1, replaced_on=AMENDED.date(), replaced_by=frozenset({2})),
        row(2, AMENDED, NEW_RULE, 0.30, related_rank=1, recency_rank=1),
        row(
            3, AMENDED - dt.timedelta(hours=3), "On 2 July 2025, the user asked about CI caching.", 0.28, related_rank=2
        ),
        row(4, SETTLED - dt.timedelta(days=9), "On 24 May 2025, the user fixed a flaky test.", 0.27, related_rank=3),
    ]


def lines() -> list[RecalledLine]:
    old = [RecalledLine(1, k, "user", f"old merge line {k} about the contact list duplicates", 0.5) for k in range(8)]
    new = [RecalledLine(2, k, "user", f"amended merge line {k} about filled fields", 0.3) for k in range(8)]
    noise = [RecalledLine(4, k, "user", f"flaky test line {k} about retries in CI", 0.33) for k in range(8)]
    return sorted(old + new + noise, key=lambda line: -line.similarity)


def test_the_replacing_episode_is_the_one_holding_the_replacing_event_not_any_session_of_that_day() -> None:
    episodes = [_episode(r) for r in history()]
    assert _replacing(episodes, {1: frozenset({2})}) == {2: 0.62}, "session 3 shares the day, not the event"
    assert _replacing(episodes, {1: frozenset({3})}) == {3: 0.62}
    assert _replacing(episodes, {1: frozenset({2, 3})}) == {2: 0.62, 3: 0.62}, "two sessions replaced two of its"
    assert _replacing(episodes, {1: frozenset({9})}) == {}, "a replacing episode not offered is not placed"
    assert _replacing(episodes, {}) == {}


def test_an_amendment_of_the_same_day_that_replaced_another_rule_is_not_labelled_relevant() -> None:
    """One developer's history (issue 47): every amending chat was of one day, and each replaced its own family's
    rule; matched by the day, all of them were labelled relevant to a bug report about one family."""
    rows = history()
    rows.append(row(5, AMENDED + dt.timedelta(hours=1), "On 2 July 2025, the user amended the units rule.", 0.05))
    rows.append(row(6, SETTLED, "On 2 June 2025, the user decided the units rule.", 0.1, replaced_by=frozenset({5})))
    rows[5]["replaced_on"] = AMENDED.date()
    picked, _ = select(rows, {}, [], CONFIG, 1500, "Why does the sync keep duplicate contacts?", NOW, lines())
    shown = {ep.id: ep for ep in picked}
    assert "relevant" in shown[2].reasons, "the amendment of the relevant rule is relevant"
    assert 5 not in shown or "relevant" not in shown[5].reasons, shown[5].reasons


def test_the_episode_holding_the_later_decision_is_shown_in_full_with_its_lines() -> None:
    picked, _ = select(history(), {}, [], CONFIG, 550, "Why does the sync keep duplicate contacts?", NOW, lines())
    shown = {ep.id: ep for ep in picked}
    assert shown[1].replaced_on == AMENDED.date(), "the replaced episode stays marked"
    assert not shown[2].compact and shown[2].summary == NEW_RULE, "the rule that holds is stated in full"
    assert shown[2].lines, "its lines outrank the unrelated session's, as if as close as the rule it replaced"
    assert len(shown[2].lines) == 8, "all its lines come before the unrelated session's"
    assert 4 not in shown or len(shown[4].lines) < 8


def test_without_a_replacement_the_later_session_gets_no_promotion() -> None:
    rows = history()
    rows[0]["replaced_on"], rows[0]["replaced_by"] = None, None
    picked, _ = select(rows, {}, [], CONFIG, 550, "Why does the sync keep duplicate contacts?", NOW, lines())
    shown = {ep.id: ep for ep in picked}
    assert shown[2].compact, "a loosely similar session is not shown in full"
    assert shown[4].lines, "and the unrelated session's closer lines come first"
