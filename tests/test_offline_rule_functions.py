"""The offline extractor's rule functions one by one (moved from test_offline_extractor.py, issue 48: modules stay
under 450 lines): the third-person rewrite, due dates, cues and entities, each on sentences written for these tests."""

from __future__ import annotations

import datetime as dt

import pytest

from jobs.extract.rules.cues import cue
from jobs.extract.rules.dates import resolve_due
from jobs.extract.rules.entities import find_entities
from jobs.extract.rules.voice import attribute, third_person

TUESDAY = dt.datetime(2025, 3, 4, 15, 0, tzinfo=dt.UTC)  # as in test_offline_extractor.py


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        ("I love painting.", "Mel loves painting."),
        ("I'm going to the lake, and I was happy there.", "Mel is going to the lake, and they were happy there."),
        ("I've decided to quit my job.", "Mel has decided to quit their job."),
        ("Yeah, I really need a break from my work.", "Mel really needs a break from their work."),
        ("Last week my sister visited me.", "Last week Mel's sister visited them."),
        ("I'd love to try it.", "Mel would love to try it."),
        ("Hey Jon, my store is doing well.", "Mel's store is doing well."),  # greeting and vocative dropped
        ("So far, so good, I'm seeing more sales.", "So far, so good, Mel is seeing more sales."),
    ],
)
def test_third_person_rewrites(sentence: str, expected: str) -> None:
    assert third_person(sentence, "Mel") == expected


@pytest.mark.parametrize(
    "sentence",
    [
        "We'll go with the Team plan.",  # who is "we"? quote instead
        "Can you send it to me?",
        "The weather was nice.",  # nothing to rewrite
        "I wanna go.",  # no safe conjugation
        "My girlfriend and I had a lovely wedding.",  # compound subject: "Mel's girlfriend and they had"
    ],
)
def test_third_person_declines_when_unsure(sentence: str) -> None:
    assert third_person(sentence, "Mel") is None
    assert attribute(sentence, "Mel").startswith('Mel said: "')


def test_role_label_is_lowercased_inside_a_sentence() -> None:
    rewritten = third_person("By the way, I went to a reading.", "The user")
    assert rewritten == "By the way, the user went to a reading."


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I'll send it by Friday.", dt.date(2025, 3, 7)),
        ("I'll call you tomorrow.", dt.date(2025, 3, 5)),
        ("I'll have it done today.", dt.date(2025, 3, 4)),
        ("Will do it next Tuesday.", dt.date(2025, 3, 11)),  # a weekday means the next one, never the same day
        ("By 14 March I'll be ready.", dt.date(2025, 3, 14)),
        ("I'll send it by Friday March 21.", dt.date(2025, 3, 21)),
        ("I'll finish it in 2 weeks.", dt.date(2025, 3, 18)),
        ("Deadline 2025-04-01.", dt.date(2025, 4, 1)),
        ("I'll do it by end of month.", dt.date(2025, 3, 31)),
        ("I'll do it soon.", None),
    ],
)
def test_due_dates(text: str, expected: dt.date | None) -> None:
    assert resolve_due(text, TUESDAY.date()) == expected


@pytest.mark.parametrize(
    ("sentence", "kind"),
    [
        ("We'll go with the Team plan at $49/seat.", "decision"),
        ("Decision: the backfill runs only at night.", "decision"),
        ("I signed up for a pottery class.", "decision"),
        ("I'll send the signed contract by Friday.", "commitment"),
        ("Turns out the fee was waived for nonprofits.", "surprise"),
        ("I'll keep you posted!", None),  # chat, not a commitment
        ("Let's do this!", None),
        ("Not surprised at all that your hard work paid off.", None),
        ("These moments remind me of how important kindness is.", None),
        ("If you hit errors, paste the body and I'll help.", None),
        ("Will you send it by Friday?", None),  # questions are handled separately
    ],
)
def test_cues(sentence: str, kind: str | None) -> None:
    found = cue(sentence)
    assert (found[0] if found else None) == kind


def test_entities_need_more_than_a_capital_letter() -> None:
    sentences = [
        "Settings are under the gear icon.",
        "Open the settings page.",
        "Ask Nadia about the budget.",
        "Nadia said the budget is fine.",
        "We moved everything to Snowflake last year.",
    ]
    found = {h.name: h.kind for h in find_entities(sentences, [])}
    assert found == {"Nadia": "person", "Snowflake": "other"}
