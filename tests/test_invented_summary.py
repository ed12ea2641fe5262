"""An invented answer is not stored (issue 46 #15): a schema-valid summary naming things the transcript
never mentions ("The user decided to migrate everything to MongoDB.", evidence [99]) was stored as the
episode and recalled as recent, and `episodes status` said "dropped 0 ungrounded events". Now the
summary is grounded: a sentence whose names, numbers or identifiers are not in the transcript is
dropped; a summary left with nothing fails the attempt (the next attempt asks again) and is
dead-lettered after the last; `status` counts what was dropped. The model is the fake Anthropic server."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest
from support import fake_anthropic as fa
from support.episode_responder import responder
from support.fake_anthropic import FakeAnthropic
from support.summarize_steps import add, run, state

from jobs.cli.status_view import render_status
from jobs.db import Database, one
from jobs.embeddings import Embedder
from jobs.extract.grounding import ground_summary
from jobs.models import Message

INVENTED = {
    "summary": "The user decided to migrate everything to MongoDB.",
    "topic_tags": ["database"],
    "importance": 0.9,
    "key_events": [{"type": "decision", "what": "Migrate everything to MongoDB.", "evidence": [99], "who": "user"}],
    "entities": [{"name": "MongoDB", "kind": "product"}],
}


@pytest.fixture
def llm_db(db: Database, fake: fa.FakeAnthropic) -> Iterator[Database]:
    settings = db.settings.with_(
        anthropic_api_key="test-key",
        anthropic_base_url=fake.base_url,
        max_retries=0,
        model_timeout_s=2.0,
        max_attempts=2,
        extractor="anthropic",
    )
    database = Database(settings, url=db.url)
    yield database
    database.close()


def test_an_invented_summary_is_not_stored_and_is_dead_lettered_after_the_last_attempt(
    llm_db: Database, fake: FakeAnthropic, embedder: Embedder
) -> None:
    add(llm_db, "s1")
    fake.responder = lambda body: fa.tool_use(INVENTED)
    first = run(llm_db, embedder)
    assert first.counts == {"failed": 1} and first.model_failures == 1, first.counts
    snap = state(llm_db)
    assert snap["episodes"] == 0 and snap["transcripts"]["s1"] == ("pending", 1), snap
    with llm_db.admin() as conn:
        error = one(conn.execute("SELECT last_error FROM transcripts"))["last_error"]
        conn.execute("UPDATE transcripts SET next_attempt_at = now()")  # skip the backoff
    assert "not in the transcript" in error and "MongoDB" in error, error
    assert run(llm_db, embedder).counts == {"dead": 1}
    assert state(llm_db)["transcripts"]["s1"] == ("dead", 2)
    status = render_status(llm_db)
    assert "dropped 1 invented summary not stored" in status, status


def test_a_summary_keeps_its_grounded_sentences_and_drops_the_invented_one(
    llm_db: Database, fake: FakeAnthropic, embedder: Embedder, caplog: pytest.LogCaptureFixture
) -> None:
    add(llm_db, "s1")

    def mixed(body: dict[str, object]) -> fa.Step | dict[str, object]:
        answer = responder(body)
        assert isinstance(answer, dict)
        return {**answer, "summary": answer["summary"] + " The user also moved the cluster to MongoDB 7."}

    fake.responder = mixed
    with caplog.at_level("INFO", logger="jobs.summarize.finish"):
        assert run(llm_db, embedder).counts == {"done": 1}
    with llm_db.admin() as conn:
        summary = one(conn.execute("SELECT summary FROM episodes"))["summary"]
    assert "MongoDB" not in summary and "Maria" in summary, summary
    (logged,) = [r for r in caplog.records if getattr(r, "action", None) == "summary_grounded"]
    assert getattr(logged, "dropped_sentences", None) == 1


@pytest.mark.parametrize(
    "summary,kept",
    [
        ("On 4 March 2025 Maria chose the Team plan at $49 per seat.", True),
        ("Maria chose the Team plan at $49 per seat; the assistant will invoice by Friday.", True),
        ("The user decided to migrate everything to MongoDB.", False),
        ("Maria chose the Enterprise plan.", False),
        ("Maria chose the Team plan at $99 per seat.", False),
        ("Maria set max_workers to 4.", False),
    ],
)
def test_the_summary_rule(summary: str, kept: bool) -> None:
    messages = [
        Message(role="user", name="Maria", content="We'll go with the Team plan at $49 per seat."),
        Message(role="assistant", content="Done. I'll send the invoice by Friday."),
    ]
    text, dropped = ground_summary(summary, messages, [dt.datetime(2025, 3, 4, 9, 20, tzinfo=dt.UTC)])
    assert (text == summary, dropped) == ((True, 0) if kept else (False, 1)), (text, dropped)
