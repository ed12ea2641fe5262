"""The relative-date shortcut (jobs/recall/relative_dates.py): a line holding none of the rules' words is left as it
is after one scan. Every text made of the rules' own words, in any order and case, comes out as the full rules make
it, so a rule whose phrase lacks those words would fail here."""

from __future__ import annotations

import datetime as dt

from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.recall import relative_dates as rd

WORDS = (
    "ago yesterday last night today tonight this morning afternoon evening tomorrow past weekend week next month "
    "year years months weeks days day 3 12 a an one two ten couple of few several monday friday sunday we met it "
    "Last NEXT Yesterday, ago. week's"
).split()


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(WORDS), min_size=1, max_size=12), st.dates(dt.date(1990, 1, 1), dt.date(2090, 1, 1)))
def test_the_shortcut_changes_nothing(words: list[str], said_on: dt.date) -> None:
    text = " ".join(words)
    assert rd.resolve_relative_dates(text, said_on) == rd._resolve(text, said_on)


def test_a_line_without_a_date_phrase_is_left_as_it_is() -> None:
    line = "We moved the deploy window to Tuesdays and the gateway to port 8443."
    assert rd.resolve_relative_dates(line, dt.date(2023, 5, 8)) == line
    assert (
        rd.resolve_relative_dates("I went there yesterday", dt.date(2023, 5, 8))
        == "I went there yesterday [7 May 2023]"
    )
