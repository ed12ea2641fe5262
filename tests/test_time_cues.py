"""Properties of the time cue: which months a message names, which episodes fall in them, and that
placing those first in fitting changes neither labels nor, with room for everything, what is shown."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.recall import RecallConfig
from jobs.recall.fitting import _episode, _named_months_first, select
from jobs.recall.time_cues import MONTHS, falls_in, named_months

NOW = dt.datetime(2025, 6, 1, 12, 0, tzinfo=dt.UTC)
WORDS = ("when", "did", "Melanie", "go", "camping", "the", "trip", "may", "march?", "marching", "Junebug", "in", "2023")
dates = st.dates(dt.date(2000, 1, 1), dt.date(2040, 12, 31))


def _next(day: dt.date) -> tuple[int, int]:
    return (day.year, day.month + 1) if day.month < 12 else (day.year + 1, 1)


@given(
    st.integers(1, 12),
    st.one_of(st.none(), st.integers(1, 28)),
    st.one_of(st.none(), st.integers(1990, 2090)),
    st.sampled_from(["When did she go camping in {}?", "What happened on {}", "{}: the move", "Was it {} or later?"]),
)
def test_a_month_named_with_or_without_day_and_year_is_a_cue(
    month: int, day: int | None, year: int | None, frame: str
) -> None:
    name = MONTHS[month - 1]
    written = name + (f" {day}" if day else "") + (f", {year}" if year else "")
    if name == "May" and frame.startswith("{}"):
        frame = "Ask about " + frame  # "May" opening a sentence is the verb (tested below)
    assert named_months(frame.format(written)) == {(month, year)}


@given(st.lists(st.sampled_from(WORDS), max_size=12))
def test_words_that_are_not_capitalised_month_names_are_no_cue(words: list[str]) -> None:
    assert named_months(" ".join(words)) == frozenset()
    assert named_months("May I ask about " + " ".join(words)) == frozenset()
    assert named_months("Thanks. May we talk " + " ".join(words)) == frozenset()


@given(dates)
def test_an_episode_falls_in_its_own_month_and_in_the_month_before_but_not_after(day: dt.date) -> None:
    assert falls_in(day, day, frozenset({(day.month, day.year)}))
    assert falls_in(day, day, frozenset({(day.month, None)}))
    before = (day.month - 1, day.year) if day.month > 1 else (12, day.year - 1)
    assert falls_in(day, day, frozenset({before}))  # told the month after it happened
    after_year, after_month = _next(day)
    assert not falls_in(day, day, frozenset({(after_month, after_year)}))
    assert not falls_in(day, day, frozenset({(day.month, day.year + 1)}))
    assert not falls_in(day, day, frozenset())


@given(dates, st.integers(0, 800), st.integers(1, 12), st.one_of(st.none(), st.integers(2000, 2042)))
def test_a_period_falls_in_a_cue_when_one_of_its_days_does(
    start: dt.date, length: int, month: int, year: int | None
) -> None:
    end = start + dt.timedelta(days=length)
    days = (start + dt.timedelta(days=k) for k in range(length + 1))
    cue = frozenset({(month, year)})
    assert falls_in(start, end, cue) == any(falls_in(d, d, cue) for d in days)


@st.composite
def rows(draw: st.DrawFn) -> tuple[list[dict[str, object]], str]:
    """Relevant and possibly related rows on arbitrary dates, and a message naming some months."""
    n = draw(st.integers(1, 20))
    out: list[dict[str, object]] = []
    relevance = related = 0
    for i in range(1, n + 1):
        is_relevant = draw(st.booleans())
        relevance += is_relevant
        related += not is_relevant
        when = NOW - dt.timedelta(days=draw(st.integers(1, 900)))
        out.append(
            {
                "id": i,
                "kind": "session",
                "session_id": f"s{i}",
                "purpose": "general",
                "summary": f"Session {i}. " + "They talked about the camping trip. " * draw(st.integers(1, 6)),
                "topic_tags": [],
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
                "relevance_rank": relevance if is_relevant else None,
                "related_rank": None if is_relevant else related,
                "recency_rank": None,
            }
        )
    months = draw(st.lists(st.sampled_from(MONTHS), min_size=1, max_size=3))
    return out, "When did Melanie go camping in " + " and ".join(months) + "?"


@settings(max_examples=200, deadline=None)
@given(rows(), st.integers(50, 1_500))
def test_time_cues_reorder_within_a_group_only_and_labels_stay_honest(
    case: tuple[list[dict[str, object]], str], budget: int
) -> None:
    out, message = case
    cfg = RecallConfig(recent_n=0)
    by_id = {r["id"]: r for r in out}
    for ep in select(out, {}, [], cfg, budget, message, NOW)[0]:
        assert ("relevant" in ep.reasons) == (by_id[ep.id]["relevance_rank"] is not None)
        assert ("possibly related" in ep.reasons) == (by_id[ep.id]["related_rank"] is not None)
    # with room for every summary in full, the cue changes nothing that is shown
    ample = [(ep.id, ep.compact) for ep in select(out, {}, [], cfg, 100_000, message, NOW)[0]]
    assert ample == [
        (ep.id, ep.compact) for ep in select(out, {}, [], replace(cfg, time_cues=False), 100_000, message, NOW)[0]
    ]
    assert len(ample) == len(out)


@settings(max_examples=200, deadline=None)
@given(rows())
def test_episodes_of_a_named_month_come_first_in_rank_order_the_rest_after_in_rank_order(
    case: tuple[list[dict[str, object]], str],
) -> None:
    out, message = case
    episodes = [_episode(r) for r in out]
    cues = named_months(message)
    ordered = _named_months_first(episodes, cues)
    inside = [ep for ep in episodes if falls_in(ep.started_at.date(), ep.ended_at.date(), cues)]
    assert [ep.id for ep in ordered] == [ep.id for ep in inside] + [ep.id for ep in episodes if ep not in inside]
