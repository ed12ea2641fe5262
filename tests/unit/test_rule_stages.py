"""The offline extractor's event engine, stage by stage (issue 48): after candidates and vetoes (tests/unit/
test_rule_records.py), agreement (an assistant's proposal the user agreed to), attribution (whose event it is) and
rendering (the event written in the third person). Sentences written for this test, from no corpus."""

from __future__ import annotations

import datetime as dt

import pytest

from jobs.extract.offline_events import Sentence, find_events, prose_label
from jobs.extract.rules.text import split_sentences
from jobs.models import KeyEvent, Message, Transcript

WHEN = dt.datetime(2026, 3, 3, 10, 0, tzinfo=dt.UTC)  # a Tuesday


def _events(*said: tuple[str, str]) -> list[KeyEvent]:
    messages = [Message(role=role, content=text, name="Dana" if role == "user" else None) for role, text in said]  # type: ignore[arg-type]
    sentences = [
        Sentence(text, i, m.speaker, prose_label(m), order)
        for order, (i, m, text) in enumerate(
            (i, m, text) for i, m in enumerate(messages) for text in split_sentences(m.content)
        )
    ]
    transcript = Transcript(
        id=1,
        tenant_id="t",
        user_id="u",
        session_id="s",
        purpose="general",
        started_at=None,
        ended_at=WHEN,
        messages=messages,
    )
    return find_events(sentences, messages, list(range(len(messages))), transcript)


# Agreement: an assistant's proposal or offer is the user's decision once the user agrees, and nothing otherwise.
@pytest.mark.parametrize(
    ("said", "expected"),
    [
        (
            (("assistant", "I'd suggest capping uploads at 25 MB."), ("user", "Yes, do that.")),
            [("decision", "Dana", [0, 1])],
        ),
        ((("assistant", "I'd suggest capping uploads at 25 MB."), ("user", "No, leave it as is.")), []),
        ((("assistant", "Should I pin the worker image to 1.14?"), ("user", "Yes.")), [("decision", "Dana", [0, 1])]),
    ],
)
def test_stage_agreement(said: tuple[tuple[str, str], ...], expected: list[tuple[str, str, list[int]]]) -> None:
    events = _events(*said)
    assert [(e.type, e.who, e.evidence) for e in events if e.type == "decision"] == [
        (kind, f"user ({who})", evidence) for kind, who, evidence in expected
    ]


# Attribution: decisions and facts are the user's; an assistant's own commitment is the assistant's.
@pytest.mark.parametrize(
    ("said", "expected"),
    [
        ((("user", "We'll go with RabbitMQ for the job queue."),), [("decision", "user (Dana)")]),
        ((("user", "Hi."), ("assistant", "We'll go with RabbitMQ for the job queue.")), []),
        (
            (("user", "Thanks."), ("assistant", "I'll send the migration runbook by Friday.")),
            [("commitment", "assistant")],
        ),
    ],
)
def test_stage_attribution(said: tuple[tuple[str, str], ...], expected: list[tuple[str, str]]) -> None:
    assert [(e.type, e.who) for e in _events(*said) if e.type != "open_question"] == expected


# Rendering: the event in the third person, its object verbatim, a commitment's due date resolved.
@pytest.mark.parametrize(
    ("said", "what", "due"),
    [
        (
            ("user", "Let's use PostgreSQL 17 for the billing service."),
            "Dana decided to use PostgreSQL 17 for the billing service.",
            None,
        ),
        (
            ("user", "I'll send the signed contract by Friday."),
            "Dana will send the signed contract by Friday.",
            dt.date(2026, 3, 6),
        ),
        (
            ("user", "Decision: the backfill runs only at night."),
            'Dana decided: "the backfill runs only at night."',
            None,
        ),
    ],
)
def test_stage_rendering(said: tuple[str, str], what: str, due: dt.date | None) -> None:
    (event,) = _events(said)
    assert (event.what, event.due) == (what, due)
