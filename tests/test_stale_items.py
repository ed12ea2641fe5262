"""Stale open questions and commitments (issue 16 A): long overdue (due + Settings.stale_grace_seconds) or
old without a due date (Settings.stale_age_seconds) step back from recall unless related to the opening message,
and the analyst views show them as stale."""

from __future__ import annotations

import datetime as dt

import pytest

from jobs import config
from jobs.concepts import EventType
from jobs.db import Database
from jobs.embeddings import Embedder
from jobs.models import EpisodeExtraction, KeyEvent
from jobs.recall import Recall, Recaller
from jobs.report import analyst_connection
from jobs.store import EpisodeRow, insert_episode

pytestmark = pytest.mark.citus  # runs on one PostgreSQL and on the Citus cluster (conftest)

NOW = dt.datetime(2026, 11, 20, 12, 0, tzinfo=dt.UTC)


def add(
    db: Database,
    embedder: Embedder,
    summary: str,
    *,
    days_ago: float,
    type_: EventType,
    what: str,
    due: dt.date | None = None,
    user: str = "u1",
) -> int:
    """One episode of acme/user ended ``days_ago`` before NOW, holding one open item."""
    ended = NOW - dt.timedelta(days=days_ago)
    episode = EpisodeExtraction(
        summary=summary,
        topic_tags=[],
        importance=0.5,
        key_events=[KeyEvent(type=type_, what=what, evidence=[0], who="user", due=due)],
    )
    row = EpisodeRow(
        tenant_id="acme",
        user_id=user,
        kind="session",
        episode=episode,
        started_at=ended,
        ended_at=ended,
        model="test",
        prompt_version="t1",
        embedding=embedder.embed([summary])[0],
        purpose="general",
        session_id=f"s-{user}-{days_ago}-{what[:10]}",
    )
    with db.tenant("acme") as conn:
        return insert_episode(conn, row)


def recall(db: Database, embedder: Embedder, message: str, now: dt.datetime = NOW) -> Recall:
    return Recaller(db, embedder).recall("acme", "u1", message, now=now)


def listed(result: Recall) -> dict[str, bool]:
    """The open items a recall lists: text -> stale."""
    return {item.what: item.stale for item in result.open_items}


def test_past_due_by_more_than_the_grace_is_stale(db: Database, embedder: Embedder) -> None:
    today = NOW.date()
    add(
        db,
        embedder,
        "Quarterly planning call.",
        days_ago=60,
        type_="commitment",
        what="The user will send the signed order form.",
        due=today - dt.timedelta(days=31),
    )
    add(
        db,
        embedder,
        "Onboarding call.",
        days_ago=40,
        type_="commitment",
        what="The agent will enable the audit log.",
        due=today - dt.timedelta(days=29),
    )
    result = recall(db, embedder, "Where do I change my avatar picture?")
    assert listed(result) == {"The agent will enable the audit log.": False}
    # Recall uses the `now` it is given: a month earlier the order form was only just overdue.
    earlier = recall(db, embedder, "Where do I change my avatar picture?", now=NOW - dt.timedelta(days=30))
    assert listed(earlier) == {
        "The agent will enable the audit log.": False,
        "The user will send the signed order form.": False,
    }
    assert "stale" not in earlier.render()


def test_without_a_due_date_older_than_the_age_is_stale(db: Database, embedder: Embedder) -> None:
    add(db, embedder, "Spring call.", days_ago=181, type_="open_question", what="Does the Pro plan include SSO?")
    add(db, embedder, "Summer call.", days_ago=179, type_="open_question", what="Can invoices be sent monthly?")
    assert listed(recall(db, embedder, "Where do I change my avatar picture?")) == {
        "Can invoices be sent monthly?": False
    }


def test_a_stale_item_related_to_the_opening_message_is_still_shown(db: Database, embedder: Embedder) -> None:
    add(db, embedder, "Spring call.", days_ago=300, type_="open_question", what="Does the Pro plan include SSO?")
    add(
        db,
        embedder,
        "Renewal call.",
        days_ago=400,
        type_="commitment",
        what="Jordan will send the renewal order form.",
        due=(NOW - dt.timedelta(days=390)).date(),
    )
    add(db, embedder, "Recent call.", days_ago=5, type_="commitment", what="The agent will fix the export.")
    result = recall(db, embedder, "Can we talk about renewing our plan?")
    # "renewing" and "renewal" share the stem "renew"; "plan" is shared with the SSO question.
    assert listed(result) == {
        "The agent will fix the export.": False,
        "Does the Pro plan include SSO?": True,
        "Jordan will send the renewal order form.": True,
    }
    assert [item.stale for item in result.open_items] == [False, True, True], "fresh items lead"
    assert ", since 2025-10-16 (stale, related to the opening message): Jordan will send the renewal" in result.render()
    assert result.to_dict()["open_items"][2]["stale"] is True


def test_a_stale_item_unrelated_to_the_opening_message_is_left_out(db: Database, embedder: Embedder) -> None:
    holder = add(
        db,
        embedder,
        "Renewal call.",
        days_ago=400,
        type_="commitment",
        what="Jordan will send the renewal order form.",
        due=(NOW - dt.timedelta(days=390)).date(),
    )
    result = recall(db, embedder, "Can we look at our Snowflake costs again?")
    assert result.open_items == []
    assert "Still open:" not in result.render()
    assert all("open item" not in ep.reasons for ep in result.episodes if ep.id == holder)


def test_the_analyst_views_show_stale_items(db: Database, embedder: Embedder) -> None:
    today = dt.datetime.now(dt.UTC).date()  # the views compute stale against now()
    stale_due = add(
        db,
        embedder,
        "Call one today.",
        days_ago=0,
        type_="commitment",
        what="Stale by due.",
        due=today - dt.timedelta(days=45),
    )
    add(
        db,
        embedder,
        "Call two today.",
        days_ago=0,
        type_="commitment",
        what="Overdue, within the grace.",
        due=today - dt.timedelta(days=3),
    )
    old_q = add(db, embedder, "Call three today.", days_ago=0, type_="open_question", what="Old question.")
    add(db, embedder, "Call four today.", days_ago=0, type_="open_question", what="New question.")
    with db.admin() as conn:  # the views measure age against now(): the old question was raised 200 days ago
        now = dt.datetime.now(dt.UTC)  # a value, not now() in a CASE (which Citus refuses in an UPDATE)
        conn.execute(
            "UPDATE episode_events SET occurred_at = CASE WHEN episode_id = %s THEN %s::timestamptz "
            "ELSE %s::timestamptz END",
            (old_q, now - dt.timedelta(days=200), now),
        )
    with analyst_connection(db, "acme") as conn:
        commitments = {
            r["what"]: (r["status"], r["stale"])
            for r in conn.execute("SELECT what, status, stale FROM analyst.commitments")
        }
        questions = {
            r["question"]: (r["status"], r["stale"])
            for r in conn.execute("SELECT question, status, stale FROM analyst.open_questions")
        }
    assert commitments == {"Stale by due.": ("overdue", True), "Overdue, within the grace.": ("overdue", False)}
    assert questions == {"Old question.": ("open", True), "New question.": ("open", False)}
    # The grace comes from Settings: with 60 days nothing is stale by its due date.
    with (
        Database(db.settings.with_(stale_grace_seconds=60 * 86400.0)) as lenient,
        analyst_connection(lenient, "acme") as conn,
    ):
        assert {r["what"]: r["stale"] for r in conn.execute("SELECT what, stale FROM analyst.commitments")} == {
            "Stale by due.": False,
            "Overdue, within the grace.": False,
        }
    # Once done, a commitment is not stale.
    with db.admin() as conn:
        conn.execute("UPDATE episode_events SET status = 'done' WHERE episode_id = %s", (stale_due,))
    with analyst_connection(db, "acme") as conn:
        row = conn.execute(
            "SELECT status, stale FROM analyst.commitments WHERE episode_id = %s", (stale_due,)
        ).fetchone()
    assert row == {"status": "done", "stale": False}


def test_grace_and_age_are_fixed_values(monkeypatch: pytest.MonkeyPatch) -> None:
    """30 days past due, 180 days old without a due date: tuning constants in Settings, which no
    variable sets any more (EPISODES_STALE_GRACE and _AGE are gone, tests/test_configuration.py)."""
    monkeypatch.setenv("EPISODES_STALE_GRACE", "7d")
    assert (config.load().stale_grace_seconds, config.load().stale_age_seconds) == (30 * 86400, 180 * 86400)
    assert "EPISODES_STALE_GRACE" in config.removed_variables()


def test_the_same_item_said_in_five_sessions_is_one_line_with_a_count(db: Database, embedder: Embedder) -> None:
    """Five sessions each ending with the same promise gave five identical "Still open" lines (issue 31):
    now one, the newest, saying how many sessions said it; other items keep their own lines."""
    for days in (30, 20, 10, 5, 2):
        add(
            db,
            embedder,
            f"Call {days} days ago.",
            days_ago=days,
            type_="commitment",
            what="Maria will share the Cost Guard thresholds with Dave."
            if days % 2
            else "maria will share the  cost guard thresholds with Dave",
        )
    add(db, embedder, "Another call.", days_ago=3, type_="commitment", what="The agent will fix the export.")
    result = recall(db, embedder, "Where do I change my avatar picture?")
    assert [(item.what, item.times) for item in result.open_items] == [
        ("maria will share the  cost guard thresholds with Dave", 5),
        ("The agent will fix the export.", 1),
    ]
    assert result.open_items[0].since == (NOW - dt.timedelta(days=2)).date().isoformat()  # the newest
    block = result.render()
    assert block.count("cost guard thresholds") == 1
    assert "(said in 5 sessions): maria will share the cost guard thresholds with Dave" in block
