"""Vetoes (a hedge, a condition, a question) apply once, after detection, to every cue (issue 48's live bug).

"Not sure, maybe we will switch to Kafka ..." matched a decision cue whose branch checked no hedge, became a
decision, and replaced the user's standing RabbitMQ decision. The sentences here were written for this test (not
taken from LoCoMo, the Claude Code files or sde-bench).
"""

from __future__ import annotations

import datetime as dt

import pytest
from psycopg.types.json import Jsonb

from jobs.db import Database
from jobs.embeddings import Embedder
from jobs.extract.offline import OfflineExtractor
from jobs.extract.rules.cues import cue
from jobs.models import Message, Transcript
from jobs.summarize import run_summarize

T0 = dt.datetime(2026, 3, 2, 10, 0, tzinfo=dt.UTC)
TENANT = "acme"
DECIDES = [
    ("user", "We'll go with RabbitMQ for the job queue, with 3 consumers per worker."),
    ("assistant", "Done, RabbitMQ it is for the job queue."),
]
HEDGES = [
    ("user", "Not sure, maybe we will switch to Kafka for the job queue next quarter."),
    ("assistant", "Understood, we can revisit the job queue later."),
]


def _add(db: Database, session: str, said: list[tuple[str, str]], start: dt.datetime) -> None:
    messages = [
        {"role": role, "content": text, "ts": (start + dt.timedelta(minutes=k)).isoformat()}
        for k, (role, text) in enumerate(said)
    ]
    with db.tenant(TENANT) as conn:
        conn.execute(
            "INSERT INTO transcripts (tenant_id, user_id, session_id, started_at, ended_at, messages, content_hash) "
            "VALUES (%s, 'u1', %s, %s, %s, %s, %s)",
            (TENANT, session, start, start + dt.timedelta(minutes=len(said)), Jsonb(messages), f"h-{session}"),
        )


def test_a_hedged_switch_neither_decides_nor_replaces_a_standing_decision(db: Database, embedder: Embedder) -> None:
    extractor = OfflineExtractor(embedder)
    _add(db, "rabbit", DECIDES, T0)
    run_summarize(db, extractor=extractor, embedder=embedder, tenant=TENANT)
    _add(db, "kafka", HEDGES, T0 + dt.timedelta(days=20))
    run_summarize(db, extractor=extractor, embedder=embedder, tenant=TENANT)
    with db.tenant(TENANT) as conn:
        rows = conn.execute(
            "SELECT ep.session_id, ev.what, ev.superseded_by FROM episode_events ev "
            "JOIN episodes ep ON ep.tenant_id = ev.tenant_id AND ep.id = ev.episode_id "
            "WHERE ev.type = 'decision' AND ep.status = 'current' ORDER BY ep.session_id"
        ).fetchall()
    decisions = {r["session_id"]: r for r in rows}
    assert set(decisions) == {"rabbit"}, rows  # the hedge decided nothing
    assert "RabbitMQ" in decisions["rabbit"]["what"]
    assert decisions["rabbit"]["superseded_by"] is None  # the RabbitMQ decision still stands


@pytest.mark.parametrize(
    "sentence",
    [
        "Not sure, maybe we will switch to Kafka for the job queue next quarter.",  # the live bug
        "If we outgrow RabbitMQ, we'll go with Kafka for the event bus.",  # a condition
        "Maybe we've decided to move the billing cron to 04:00 UTC, I forget.",  # a hedge on a past decision
        "We might go with Postgres 17 for the ledger service.",  # a modal hedge
        "Not sure yet, but I'd rather use Terraform for the staging cluster.",  # a hedged preference
    ],
)
def test_every_cue_is_vetoed_by_a_hedge_or_a_condition(sentence: str) -> None:
    assert cue(sentence) is None


@pytest.mark.parametrize(
    ("sentence", "kind"),
    [
        ("We'll go with RabbitMQ for the job queue.", "decision"),
        ("We will switch to Kafka for the event bus.", "decision"),
        ("I'd rather use Terraform for the staging cluster.", "preference"),
    ],
)
def test_the_same_cues_without_a_veto_still_fire(sentence: str, kind: str) -> None:
    found = cue(sentence)
    assert found is not None and found[0] == kind


@pytest.fixture(scope="module")
def extractor(embedder: Embedder) -> OfflineExtractor:
    return OfflineExtractor(embedder)


def _decisions(extractor: OfflineExtractor, *said: tuple[str, str]) -> list[str]:
    messages = [Message(role=role, content=text, name="Dana" if role == "user" else None) for role, text in said]  # type: ignore[arg-type]
    transcript = Transcript(
        id=1,
        tenant_id="t",
        user_id="u",
        session_id="s",
        purpose="general",
        started_at=None,
        ended_at=T0,
        messages=messages,
    )
    return [e.what for e in extractor.extract(transcript).extraction.key_events if e.type == "decision"]


@pytest.mark.parametrize(
    "reply",
    ["Yes, maybe next quarter if we outgrow RabbitMQ.", "Okay, maybe.", "Sounds good, if it fits the budget."],
)
def test_a_hedged_agreement_adopts_no_proposal(extractor: OfflineExtractor, reply: str) -> None:
    """The agreement stage takes the same vetoes: a hedged "yes" to an assistant's offer or proposal decides nothing."""
    for ask in ("Should I switch the job queue to Kafka 3.7?", "I'd suggest moving the job queue to Kafka 3.7."):
        assert _decisions(extractor, ("assistant", ask), ("user", reply)) == [], ask


def test_a_plain_agreement_still_adopts_the_proposal(extractor: OfflineExtractor) -> None:
    for ask in ("Should I switch the job queue to Kafka 3.7?", "I'd suggest moving the job queue to Kafka 3.7."):
        assert _decisions(extractor, ("assistant", ask), ("user", "Yes, do that.")) != [], ask
