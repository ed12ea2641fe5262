"""The analyst views across sessions: resolved questions and done commitments name who resolved them (by the
summarize job, or for acme by its own resolve_item query), commitment status against now, a super-summary's copy
resolving its source, superseded episodes leaving the views, and the failures view.

Data: the bundled example transcripts summarised once per test process (tests/support/analyst_examples.py; the
module docstring of tests/test_analyst.py says how). Marked ``citus``: each test runs on one PostgreSQL and again
on the Citus cluster."""

from __future__ import annotations

import datetime as dt

import pytest
from support.analyst_examples import as_role, owner

from jobs.db import Database, one
from jobs.models import EpisodeExtraction, KeyEvent
from jobs.sql import query
from jobs.store import EpisodeRow, insert_episode

pytestmark = pytest.mark.citus  # runs on one PostgreSQL and on the Citus cluster (conftest)


# -- lifecycle across sessions -------------------------------------------------------------------


def test_resolved_questions_and_done_commitments_show_who_resolved_them(ro_db: Database) -> None:
    rows = as_role(ro_db, "episodes_analyst", "SELECT * FROM analyst.open_questions ORDER BY raised_at", tenant="acme")
    resolved = [r for r in rows if r["status"] == "resolved"]
    assert sorted(r["session_id"] for r in resolved) == ["acme-maria-2024-02-13", "acme-tom-2024-01-16"]
    tom = next(r for r in resolved if r["user_id"] == "u-tom")
    later = owner(ro_db, "SELECT id, ended_at FROM episodes WHERE session_id = 'acme-tom-2024-02-06'")[0]
    assert tom["resolved_by"] == later["id"] and tom["resolved_by_session_id"] == "acme-tom-2024-02-06"
    assert tom["resolved_at"] == later["ended_at"]
    assert tom["days_open"] == (tom["resolved_at"] - tom["raised_at"]).days == 21
    still_open = [r for r in rows if r["status"] == "open"]
    assert still_open and all(r["resolved_at"] is None and r["resolved_by"] is None for r in still_open)
    assert all(r["days_open"] > 365 for r in still_open)  # examples end in 2025; now() is later

    done = as_role(ro_db, "episodes_analyst", "SELECT * FROM analyst.commitments WHERE status = 'done'", tenant="acme")
    assert sorted((r["session_id"], r["due"], r["done_by_session_id"]) for r in done) == [
        ("acme-maria-2024-02-13", dt.date(2024, 3, 1), "acme-maria-2024-03-05"),
        ("acme-tom-2024-01-16", dt.date(2024, 1, 26), "acme-tom-2024-02-06"),
    ]
    assert all(r["days_overdue"] is None for r in done)


def test_resolutions_made_by_the_summarize_job_show_in_the_views(ro_db: Database) -> None:
    """globex went through the real pipeline: each later session resolved the items offered to it."""
    done = as_role(
        ro_db, "episodes_analyst", "SELECT * FROM analyst.commitments WHERE status = 'done'", tenant="globex"
    )
    assert len(done) == 7  # the commitments the globex sessions marked done through the real pipeline
    ends = {
        r["session_id"]: r["ended_at"]
        for r in owner(
            ro_db, "SELECT session_id, ended_at FROM episodes WHERE tenant_id = 'globex' AND status = 'current'"
        )
    }
    for r in done:
        assert r["done_at"] == ends[r["done_by_session_id"]] > r["committed_at"]
        assert r["done_by_session_id"] != r["session_id"] and r["days_overdue"] is None
    truth = owner(ro_db, "SELECT count(*) AS n FROM episode_events WHERE tenant_id = 'globex' AND status = 'done'")
    assert truth[0]["n"] == len(done)


def test_commitment_status_is_computed_against_now(edb: Database) -> None:
    today = owner(edb, "SELECT (now() AT TIME ZONE 'UTC')::date AS d")[0]["d"]
    ids = [
        r["id"]
        for r in owner(
            edb,
            """
        SELECT ev.id FROM episode_events ev JOIN episodes e ON e.tenant_id = ev.tenant_id AND e.id = ev.episode_id
        WHERE ev.type = 'commitment' AND ev.status = 'open' AND e.tenant_id = 'acme' ORDER BY ev.id LIMIT 3""",
        )
    ]
    owner(
        edb,
        "UPDATE episode_events SET due = CASE id WHEN %s THEN %s::date WHEN %s THEN %s::date ELSE NULL END "
        "WHERE id = ANY (%s) RETURNING id",
        (ids[0], today + dt.timedelta(days=10), ids[1], today - dt.timedelta(days=3), ids),
    )
    rows = as_role(
        edb, "episodes_analyst", "SELECT event_id, status, days_overdue FROM analyst.commitments", tenant="acme"
    )
    got = {r["event_id"]: (r["status"], r["days_overdue"]) for r in rows}
    assert [got[i] for i in ids] == [("open", 0), ("overdue", 3), ("open", None)]


def test_resolution_of_a_super_summary_copy_counts_for_the_source(edb: Database) -> None:
    """An open item of a compressed episode lives on as a copy in the super-summary; if a later
    session resolves the copy, the analyst views count the original as resolved."""
    with edb.tenant("acme") as conn:
        src = one(
            conn.execute("""
            SELECT ev.id, ev.what, ev.episode_id
            FROM episode_events ev JOIN episodes e ON e.tenant_id = ev.tenant_id AND e.id = ev.episode_id
            WHERE e.tenant_id = 'acme' AND e.session_id = 'acme-lena-2024-03-12' AND ev.type = 'commitment'
              AND ev.status = 'open'
            ORDER BY ev.ordinal LIMIT 1""")
        )
        extraction = EpisodeExtraction(
            summary="Lena hired a senior and a junior analytics engineer in 2024.",
            topic_tags=["hiring"],
            key_events=[KeyEvent(type="commitment", what=src["what"][:400], evidence=[0], who="Lena")],
            entities=[],
            importance=0.7,
        )
        super_id = insert_episode(
            conn,
            EpisodeRow(
                tenant_id="acme",
                user_id="u-lena",
                kind="super",
                episode=extraction,
                started_at=dt.datetime(2024, 3, 1, tzinfo=dt.UTC),
                ended_at=dt.datetime(2024, 3, 31, tzinfo=dt.UTC),
                model="test",
                prompt_version="test",
                embedding=None,
                period_start=dt.date(2024, 3, 1),
                period_end=dt.date(2024, 3, 31),
            ),
            source_event_ids=[src["id"]],
        )
        conn.execute(
            "UPDATE episodes SET compressed_into = %s WHERE tenant_id = 'acme' AND id = %s",
            (super_id, src["episode_id"]),
        )
        copy = one(
            conn.execute("SELECT id FROM episode_events WHERE tenant_id = 'acme' AND episode_id = %s", (super_id,))
        )
        later = one(
            conn.execute(
                "SELECT id, ended_at FROM episodes WHERE tenant_id = 'acme' AND session_id = 'acme-lena-2024-04-09'"
            )
        )
        conn.execute(
            query("resolve_item"),
            {
                "event_id": copy["id"],
                "episode_id": later["id"],
                "resolved_at": later["ended_at"],
                "tenant_id": "acme",
                "user_id": "u-lena",
            },
        )
    rows = as_role(
        edb, "episodes_analyst", "SELECT event_id, status, done_by_session_id FROM analyst.commitments", tenant="acme"
    )
    by_id = {r["event_id"]: r for r in rows}
    assert copy["id"] not in by_id  # super-summary copies are not counted twice
    assert (by_id[src["id"]]["status"], by_id[src["id"]]["done_by_session_id"]) == ("done", "acme-lena-2024-04-09")
    kinds = as_role(
        edb,
        "episodes_analyst",
        "SELECT kind, count(*) AS n, count(compressed_into) AS compressed "
        "FROM analyst.episode_timeline WHERE user_id = 'u-lena' "
        "GROUP BY kind ORDER BY kind",
        tenant="acme",
    )
    assert [(k["kind"], k["compressed"]) for k in kinds] == [("session", 1), ("super", 0)]


def test_superseded_episodes_leave_the_views(edb: Database) -> None:
    before = as_role(
        edb,
        "episodes_operator",
        "SELECT count(*) AS n FROM analyst.decisions WHERE session_id = 'acme-maria-2024-06-11'",
    )[0]["n"]
    assert before >= 1
    owner(edb, "UPDATE episodes SET status = 'superseded' WHERE session_id = 'acme-maria-2024-06-11' RETURNING id")
    for view in ("decisions", "commitments", "open_questions", "episode_timeline", "entity_mentions"):
        left = as_role(
            edb,
            "episodes_operator",
            f"SELECT count(*) AS n FROM analyst.{view} WHERE session_id = 'acme-maria-2024-06-11'",
        )
        assert left[0]["n"] == 0, view


def test_failures_view_lists_dead_letters_retries_and_failed_calls(ro_db: Database) -> None:
    rows = as_role(ro_db, "episodes_analyst", "SELECT * FROM analyst.failures ORDER BY source", tenant="globex")
    by_source = {r["source"]: r for r in rows if r["source"] != "model_call"}
    assert set(by_source) == {"dead_letter", "retrying"}
    assert by_source["retrying"]["next_attempt_at"] is not None and by_source["retrying"]["error"]
    calls = sorted(r["outcome"] for r in rows if r["source"] == "model_call")
    assert calls == ["refusal", "refusal", "transient"]
    truth = owner(ro_db, "SELECT session_id, status FROM transcripts WHERE status = 'dead' OR last_error IS NOT NULL")
    assert {(t["session_id"], t["status"]) for t in truth} == {
        (by_source["dead_letter"]["session_id"], "dead"),
        (by_source["retrying"]["session_id"], "pending"),
    }
