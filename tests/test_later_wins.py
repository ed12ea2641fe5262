"""Later decisions replace earlier ones (and preferences follow the same rule), live and through
Message Batches, over the real SDK against the fake server: offered, grounded, written, undone."""

from __future__ import annotations

import re
from typing import Any

import pytest
from psycopg.types.json import Jsonb
from support import fake_anthropic as fa
from support.episode_responder import replacing_responder, responder
from support.fake_anthropic import FakeAnthropic

from jobs.db import Database, one
from jobs.embeddings import Embedder
from jobs.extract.claude import AnthropicExtractor
from jobs.models import KeyEvent
from jobs.report.data import OPERATOR_ROLE, analyst_role
from jobs.summarize import BatchRunner, run_summarize

# Python logic through the database: runs on one PostgreSQL only; the tests marked citus below are SQL shape.

FIRST = [
    {"role": "user", "name": "Maria", "content": "We'll go with the Team plan at $49 per seat."},
    {"role": "assistant", "content": "Done, the Team plan it is."},
]
SECOND = [
    {"role": "user", "name": "Maria", "content": "Actually, we decided to switch to the Business plan instead."},
    {"role": "assistant", "content": "Switched you to Business."},
]


def _add(db: Database, session: str, messages: list[dict[str, Any]], day: int, content_hash: str | None = None) -> None:
    with db.tenant("acme") as conn:
        conn.execute(
            "INSERT INTO transcripts (tenant_id, user_id, session_id, started_at, ended_at, messages, content_hash) "
            "VALUES ('acme', 'u1', %s, %s, %s, %s, %s) ON CONFLICT (tenant_id, session_id) DO UPDATE "
            "SET messages = EXCLUDED.messages, content_hash = EXCLUDED.content_hash, status = 'pending', "
            "ended_at = EXCLUDED.ended_at",
            (
                session,
                f"2025-03-{day:02d} 09:00Z",
                f"2025-03-{day:02d} 09:20Z",
                Jsonb(messages),
                content_hash or f"h-{session}",
            ),
        )


def _summarise(db: Database, embedder: Embedder, *, batch: bool = False) -> None:
    with AnthropicExtractor(db.settings) as claude:
        if batch:
            assert BatchRunner(db, claude, embedder).run(poll_seconds=0.1).counts["done"] == 1
        else:
            assert run_summarize(db, extractor=claude, embedder=embedder).counts["done"] == 1


def _decisions(db: Database) -> dict[str, dict[str, Any]]:
    """analyst.decisions as the operator sees it, by session."""
    with db.pool.connection() as conn, conn.transaction(), analyst_role(conn, OPERATOR_ROLE):
        rows = conn.execute(
            "SELECT session_id, what, event_id, superseded_by, superseded_by_session_id, "
            "superseded_by_type, current FROM analyst.decisions ORDER BY decided_at"
        ).fetchall()
    return {r["session_id"]: r for r in rows}


def _reversal(db: Database, fake: fa.FakeAnthropic, embedder: Embedder, *, batch: bool) -> dict[str, Any]:
    """A first session decides Team; a second (live or batch) switches to Business."""
    _add(db, "first", FIRST, 4)
    _summarise(db, embedder)
    _add(db, "second", SECOND, 10)
    fake.responder = replacing_responder
    _summarise(db, embedder, batch=batch)
    with db.admin() as conn:
        dropped = one(
            conn.execute("SELECT dropped_events FROM episodes WHERE session_id = 'second' AND status = 'current'")
        )["dropped_events"]
    return {"decisions": _decisions(db), "dropped": dropped}


def _sent(fake: fa.FakeAnthropic, *, batch: bool) -> str:
    if batch:
        posts = [r for r in fake.requests if r.path == "/v1/messages/batches" and r.method == "POST"]
        return str(posts[-1].body["requests"][0]["params"]["messages"][0]["content"])
    return str(fake.calls()[-1].body["messages"][0]["content"])


def _block(prompt: str) -> str:
    return re.sub(r"id \d+", "id N", prompt.split("<current_decisions>")[1].split("</current_decisions>")[0])


@pytest.mark.citus  # supersede_events across episodes
def test_a_later_session_that_reverses_a_decision_supersedes_it(
    llm_db: Database, fake: FakeAnthropic, embedder: Embedder
) -> None:
    result = _reversal(llm_db, fake, embedder, batch=False)
    prompt = _sent(fake, batch=False)
    assert "(decision since 2025-03-04): Maria decided: We'll go with the Team plan" in prompt
    old, new = result["decisions"]["first"], result["decisions"]["second"]
    assert old["current"] is False and old["superseded_by"] == new["event_id"]
    assert old["superseded_by_session_id"] == "second" and old["superseded_by_type"] == "decision"
    assert new["current"] is True and new["superseded_by"] is None
    assert result["dropped"] == 1  # the preference that named an id never offered lost its link
    with llm_db.admin() as conn:
        pref = conn.execute("SELECT type, superseded_by FROM episode_events WHERE type = 'preference'").fetchone()
        standing = one(
            conn.execute(
                "SELECT count(*) AS n FROM episode_events "
                "WHERE type IN ('decision', 'preference') AND superseded_by IS NULL"
            )
        )
    assert pref == {"type": "preference", "superseded_by": None}  # kept as an event, replacing nothing
    assert standing["n"] == 2  # Business and the preference stand; Team does not


def test_a_batch_reversal_supersedes_like_a_live_one(llm_db: Database, fake: FakeAnthropic, embedder: Embedder) -> None:
    live = _reversal(llm_db, fake, embedder, batch=False)
    sent_live = _sent(fake, batch=False)
    with llm_db.admin() as conn:
        conn.execute("TRUNCATE transcripts, episodes, model_calls, model_batches CASCADE")
    fake.responder = responder
    fake.batch_delay = 0.2
    batched = _reversal(llm_db, fake, embedder, batch=True)
    sent_batch = _sent(fake, batch=True)
    assert _block(sent_batch) == _block(sent_live)  # offered exactly as a live request offers them
    with llm_db.admin() as conn:
        item = one(conn.execute("SELECT offered_items, offered_decisions FROM model_batch_items"))
    assert item["offered_items"] == [] and item["offered_decisions"] == [batched["decisions"]["first"]["event_id"]]
    for result in (live, batched):
        old = result["decisions"]["first"]
        assert old["current"] is False and old["superseded_by_session_id"] == "second"
        assert result["decisions"]["second"]["current"] is True
        assert result["dropped"] == 1


@pytest.mark.citus  # the undo's UPDATE across episodes
def test_a_superseded_replacing_episode_makes_the_old_decision_current_again(
    llm_db: Database, fake: FakeAnthropic, embedder: Embedder
) -> None:
    _reversal(llm_db, fake, embedder, batch=False)
    # The second session's transcript changes: its episode is superseded, the reversal undone, and
    # the re-run (which no longer reverses anything) leaves Team standing.
    fake.responder = responder
    _add(
        llm_db,
        "second",
        [
            {"role": "user", "name": "Maria", "content": "How do I export a report?"},
            {"role": "assistant", "content": "Use the Export button."},
        ],
        10,
        "h-second-2",
    )
    _summarise(llm_db, embedder)
    decisions = _decisions(llm_db)
    assert decisions["first"]["current"] is True and decisions["first"]["superseded_by"] is None
    assert "second" not in decisions
    # ... and the re-run was offered Team again, as a current decision.
    assert "(decision since 2025-03-04): Maria decided" in _sent(fake, batch=False)


def _offline(embedder: Embedder, text: str) -> list[KeyEvent]:
    import datetime as dt

    from jobs.extract.offline import OfflineExtractor
    from jobs.models import Message, OpenItem, Transcript

    when = dt.datetime(2025, 3, 10, 9, 20, tzinfo=dt.UTC)
    transcript = Transcript(
        id=1,
        tenant_id="acme",
        user_id="u1",
        session_id="s2",
        purpose="general",
        started_at=None,
        ended_at=when,
        messages=[
            Message(role="user", name="Maria", content=text),
            Message(role="assistant", content="Noted, I have changed that for you."),
        ],
    )
    offered = [
        OpenItem(7, "preference", "Maria prefers imperial units in the weekly reports.", when - dt.timedelta(days=30)),
        OpenItem(8, "decision", "Maria decided to book the flight to Osaka on April 2.", when - dt.timedelta(days=20)),
    ]
    return OfflineExtractor(embedder).extract(transcript, offered).extraction.key_events


def test_the_offline_extractor_links_a_clear_reversal_and_ignores_an_unrelated_decision(embedder: Embedder) -> None:
    reversal = _offline(embedder, "Actually, I prefer metric units in the weekly reports from now on.")
    assert [(e.type, e.replaces) for e in reversal] == [("preference", 7)]
    unrelated = _offline(embedder, "Actually, we decided to hire Mei Tanaka for the junior analyst role.")
    assert [e.type for e in unrelated] == ["decision"] and unrelated[0].replaces is None
    no_cue = _offline(embedder, "We decided to keep the weekly reports short, two pages at most.")
    assert all(e.replaces is None for e in no_cue)


def _two_sessions(embedder: Embedder, amendment: str) -> tuple[list[KeyEvent], list[KeyEvent]]:
    """Session 1 settles a merge rule (an assistant's "Settled:" the user agrees to) and an unrelated decision;
    session 2, a month later, says ``amendment``. Returns both sessions' key events."""
    import datetime as dt

    from jobs.extract.offline import OfflineExtractor
    from jobs.models import Message, OpenItem, Transcript

    first_day = dt.datetime(2026, 3, 2, 10, 0, tzinfo=dt.UTC)

    def session(said: list[tuple[str, str]], when: dt.datetime, sid: str) -> Transcript:
        return Transcript(
            id=1,
            tenant_id="acme",
            user_id="u1",
            session_id=sid,
            purpose="general",
            started_at=None,
            ended_at=when,
            messages=[Message.model_validate({"role": role, "content": text}) for role, text in said],
        )

    extractor = OfflineExtractor(embedder)
    one = extractor.extract(
        session(
            [
                ("user", "When two tags collide in a merge, which one wins?"),
                ("assistant", "Settled: on a tag collision, merge keeps the latest tag."),
                ("user", "Yes, agreed. Also, let's use pytest-xdist for the CI runs."),
            ],
            first_day,
            "s1",
        )
    ).extraction.key_events
    offered = [OpenItem(10 + k, e.type, e.what, first_day) for k, e in enumerate(one) if e.type == "decision"]
    two = extractor.extract(
        session([("user", amendment), ("assistant", "Understood.")], first_day + dt.timedelta(days=30), "s2"), offered
    ).extraction.key_events
    return one, two


@pytest.mark.parametrize(
    "amendment",
    [
        "Amendment to the merge rule from last month: on a tag collision, merge keeps the earliest tag.",
        "Superseding keep-latest: on a tag collision, we keep the earliest tag now.",
        "Let's switch from keep-latest to keep-earliest for tag collisions in merge.",
    ],
)
def test_an_offline_amendment_links_to_the_rule_it_supersedes(embedder: Embedder, amendment: str) -> None:
    one, two = _two_sessions(embedder, amendment)
    assert [e.what for e in one if e.type == "decision"] == [
        'The user decided: "on a tag collision, merge keeps the latest tag."',
        "The user decided to use pytest-xdist for the CI runs.",
    ]
    [decision] = [e for e in two if e.type == "decision"]
    assert decision.replaces == 10, "the merge rule, not the CI decision"
    assert "earliest" in decision.what


def test_an_offline_decision_without_an_amendment_cue_replaces_nothing(embedder: Embedder) -> None:
    _, two = _two_sessions(embedder, "Let's use the Redis cache for the session store instead of memcached.")
    assert [e.replaces for e in two if e.type == "decision"] == [None]
    _, no_cue = _two_sessions(embedder, "Decision: on a tag collision, merge keeps the earliest tag.")
    assert [e.replaces for e in no_cue if e.type == "decision"] == [None]  # conservative: no cue, no link


def test_an_offline_decision_restated_with_other_numbers_replaces_the_earlier_one(embedder: Embedder) -> None:
    """No cue at all: the same decision with another date replaces the offered one (later wins); restated with
    the same specifics it replaces nothing; a "from now on" rule on another matter replaces nothing either."""
    moved = _offline(embedder, "We decided to book the flight to Osaka on April 5.")
    assert [(e.type, e.replaces) for e in moved] == [("decision", 8)]
    same = _offline(embedder, "We decided to book the flight to Osaka on April 2.")
    assert [(e.type, e.replaces) for e in same] == [("decision", None)]
    other = _offline(embedder, "From now on, we'll book every team flight through the travel desk.")
    assert [e.replaces for e in other if e.type == "decision"] == [None]
