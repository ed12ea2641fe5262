"""The compress job end to end against a real PostgreSQL, offline and through the wire (real SDK, fake server)
for Claude: periods, what a super-summary keeps, reruns that change nothing, the hierarchical reduce, a fault mid-run."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from support import fake_anthropic as fa
from support.compress_checks import (
    NOW,
    YEAR_2024,
    half_written,
    lineage,
    offline,
    pointers,
    snapshot,
    unreachable,
)
from support.compress_data import add, compress_responder, supers, year_2024
from support.fake_anthropic import FakeAnthropic

from jobs.compress import (
    AnthropicCompressor,
    Period,
    cutoff_time,
    parse_age,
    period_floor,
    run_compress,
)
from jobs.db import Database, one
from jobs.embeddings import Embedder
from jobs.errors import ConfigError
from jobs.models import (
    estimate_tokens,
)

# Python logic through the database: runs on one PostgreSQL only; the tests marked citus below are SQL shape.


# ------------------------------------------------------------------------------------------------
# Fixtures and helpers
# ------------------------------------------------------------------------------------------------


@pytest.fixture
def fake() -> Iterator[fa.FakeAnthropic]:
    with fa.FakeAnthropic(responder=compress_responder) as server:
        yield server


def _claude(db: Database, **changes: Any) -> AnthropicCompressor:
    """A Claude compressor on the fake server (use it in a with block, which closes it)."""
    return AnthropicCompressor(db.settings.with_(**changes))


# ------------------------------------------------------------------------------------------------
# Tests
# ------------------------------------------------------------------------------------------------


def test_cut_off_and_periods() -> None:
    cutoff = cutoff_time(NOW, "12mo")
    assert cutoff.date() == dt.date(2025, 11, 21)
    assert period_floor(cutoff, "year") == dt.date(2025, 1, 1)  # years <= 2024 qualify, 2025 does not
    assert period_floor(cutoff, "quarter") == dt.date(2025, 10, 1)  # 2025-Q3 qualifies, Q4 does not
    assert period_floor(cutoff_time(NOW, "2y"), "year") == dt.date(2024, 1, 1)
    assert parse_age("18mo") == (18, 0) and parse_age("8w") == (0, 56) and parse_age("400d") == (0, 400)
    assert cutoff_time(dt.datetime(2025, 3, 31, tzinfo=dt.UTC), "1mo").date() == dt.date(2025, 2, 28)
    with pytest.raises(ConfigError, match="12mo"):
        parse_age("a year")
    assert Period.of("quarter", dt.date(2024, 4, 1)) == Period(dt.date(2024, 4, 1), dt.date(2024, 6, 30))
    labels = [Period.of(unit, dt.date(2024, 1, 1)).label for unit in ("year", "quarter", "month")]
    assert labels == ["2024", "2024-Q1", "2024-01"]


@pytest.mark.citus  # supers, lineage and pointers written on the shards
def test_offline_compress_keeps_decisions_and_open_items_and_reruns_change_nothing(
    db: Database, embedder: Embedder
) -> None:
    sources = year_2024(db, embedder)
    later = [
        add(db, "2025-03-01T10:00", "Maria asked about SSO.", embedder=embedder),
        add(db, "2025-05-01T10:00", "Maria enabled SSO.", embedder=embedder),
    ]
    lone = add(db, "2023-05-01T10:00", "Maria signed up.", embedder=embedder)
    report = offline(db, embedder)
    assert report.counts["created"] == 1 and report.sources == 3 and report.call_tokens == []
    (sup,) = supers(db)
    assert (sup["period_start"], sup["period_end"]) == YEAR_2024 and sup["model"] == "offline"
    assert sup["summary"].startswith("Offline merge of 3 sessions from 2024-02-03 to 2024-11-20.")
    assert sup["purpose"] == "support" and sup["user_id"] == "u1"
    assert sup["topic_tags"][0] == "pricing" and len(sup["embedding"].to_numpy()) == 384
    assert sup["started_at"] == dt.datetime(2024, 2, 3, 9, 40, tzinfo=dt.UTC)
    assert sup["ended_at"] == dt.datetime(2024, 11, 20, 10, tzinfo=dt.UTC)
    assert lineage(db, sup["id"]) == sources
    assert pointers(db, sources) == [sup["id"]] * 3
    assert pointers(db, [*later, lone]) == [None, None, None]
    assert unreachable(db, sup["id"], sources) == 0
    with db.admin() as conn:
        events = conn.execute(
            "SELECT s.type, s.what, s.evidence, s.occurred_at, s.evidence_quote, s.status, s.who, "
            "src.evidence AS src_evidence, src.occurred_at AS src_at, src.evidence_quote AS src_quote, "
            "src.status AS src_status FROM episode_events s JOIN episode_events src "
            "ON src.tenant_id = s.tenant_id AND src.id = s.source_event_id "
            "WHERE s.episode_id = %s ORDER BY s.ordinal",
            (sup["id"],),
        ).fetchall()
        entities = [
            r["name"]
            for r in conn.execute("SELECT name FROM episode_entities WHERE episode_id = %s ORDER BY id", (sup["id"],))
        ]
        total = one(conn.execute("SELECT count(*) AS n FROM episode_events WHERE episode_id = %s", (sup["id"],)))
    # 2 decisions + 1 open question + 1 open commitment; not the surprise, not the finished commitment
    assert [e["type"] for e in events] == ["decision", "open_question", "commitment", "decision"]
    assert total["n"] == 4
    for e in events:
        assert (e["evidence"], e["occurred_at"], e["evidence_quote"], e["status"]) == (
            e["src_evidence"],
            e["src_at"],
            e["src_quote"],
            e["src_status"],
        )
        assert e["evidence_quote"].startswith("Message") and e["who"] == "Maria"
    assert entities[:2] == ["Maria", "Acme"]  # by frequency (2 each), then first seen

    before = snapshot(db)
    again = offline(db, embedder)
    assert again.counts["unchanged"] == 1 and again.counts["created"] == 0 and again.sources == 0
    assert snapshot(db) == before


def test_claude_path_through_the_fake_server_and_a_second_run_changes_nothing(
    llm_db: Database, fake: FakeAnthropic, embedder: Embedder
) -> None:
    u1 = year_2024(llm_db, user="u1")
    u2 = year_2024(llm_db, user="u2", word="Globex")
    with _claude(llm_db) as compressor:
        report = run_compress(llm_db, compressor=compressor, embedder=embedder, now=NOW)
    assert report.counts["created"] == 2 and len(report.call_tokens) == 2 and min(report.call_tokens) > 0
    request = fake.calls()[0].body
    assert request["tool_choice"] == {"type": "tool", "name": "record_period_summary"}
    assert request["system"][0]["cache_control"] == {"type": "ephemeral"}
    content = request["messages"][0]["content"]
    assert '<episodes period="2024" sessions="3">' in content and "[E" in content
    assert "Maria did not expect" not in content  # surprises are not carried
    for user, sources in (("u1", u1), ("u2", u2)):
        sup = next(s for s in supers(llm_db) if s["user_id"] == user)
        assert sup["model"] == "claude-haiku-4-5" and sup["prompt_version"].startswith("compress-")
        assert sup["summary"].startswith("Over the period the user") and sup["input_tokens"] > 0
        assert lineage(llm_db, sup["id"]) == sources and unreachable(llm_db, sup["id"], sources) == 0
        with llm_db.admin() as conn:
            whats = [
                r["what"]
                for r in conn.execute(
                    "SELECT what FROM episode_events WHERE episode_id = %s ORDER BY ordinal", (sup["id"],)
                )
            ]
            names = {
                r["name"] for r in conn.execute("SELECT name FROM episode_entities WHERE episode_id = %s", (sup["id"],))
            }
        assert len(whats) == 4 and [w.startswith("Restated") for w in whats] == [True, True, True, False]
        assert "Maria" in names
    with llm_db.admin() as conn:
        calls = conn.execute("SELECT template, outcome, user_id FROM model_calls ORDER BY id").fetchall()
    assert [(c["template"], c["outcome"]) for c in calls] == [("compress_sessions_user.j2", "ok")] * 2

    before, sent = snapshot(llm_db), len(fake.calls())
    with _claude(llm_db) as compressor:
        again = run_compress(llm_db, compressor=compressor, embedder=embedder, now=NOW)
    assert again.counts["unchanged"] == 2 and again.call_tokens == []
    assert len(fake.calls()) == sent and snapshot(llm_db) == before


def test_a_long_period_is_reduced_hierarchically_within_the_budget(
    llm_db: Database, fake: FakeAnthropic, embedder: Embedder
) -> None:
    budget = 600
    for user, n in (("u1", 12), ("u2", 36)):
        for i in range(n):
            add(
                llm_db,
                f"2024-{1 + i * 11 // n:02d}-{1 + i % 27:02d}T10:00",
                f"Session {i} about the warehouse migration and its budget, with Dana and the data team.",
                user=user,
                tags=("warehouse", f"topic {i % 4}"),
                entities=(("Dana", "person"),),
                events=(
                    ("decision", f"Dana decided step {i} of the warehouse migration."),
                    ("commitment", f"The agent promised the cost report number {i}."),
                ),
            )
    with _claude(llm_db, transcript_token_budget=budget) as compressor:
        report = run_compress(llm_db, compressor=compressor, embedder=embedder, now=NOW)
        estimates = list(compressor.request_tokens)
    assert report.counts["created"] == 2
    contents = [c.body["messages"][0]["content"] for c in fake.calls()]
    assert all(estimate_tokens(c) <= budget for c in contents)
    assert max(estimates) <= budget and len(estimates) == len(contents)
    reduces = [c for c in contents if "<partial_summaries" in c]
    assert len(reduces) >= 2
    for sup in supers(llm_db):
        with llm_db.admin() as conn:
            ids = [r["id"] for r in conn.execute("SELECT id FROM episodes WHERE compressed_into = %s", (sup["id"],))]
        assert len(ids) in (12, 36) and unreachable(llm_db, sup["id"], ids) == 0
        assert lineage(llm_db, sup["id"]) == sorted(ids)
    with llm_db.admin() as conn:
        calls = conn.execute(
            "SELECT user_id, template, input_tokens + cache_read_tokens + cache_write_tokens AS tokens FROM model_calls"
        ).fetchall()
    assert Counter(c["template"] for c in calls)["compress_reduce_user.j2"] == len(reduces)
    # A period three times as long costs more calls, not larger ones.
    per_user = {u: [c["tokens"] for c in calls if c["user_id"] == u] for u in ("u1", "u2")}
    assert len(per_user["u2"]) > len(per_user["u1"]) >= 3
    assert max(per_user["u2"]) <= max(per_user["u1"]) * 1.25


def test_a_fault_in_the_second_group_leaves_it_untouched_and_a_rerun_completes_it(
    llm_db: Database, fake: FakeAnthropic, embedder: Embedder
) -> None:
    u1 = year_2024(llm_db, user="u1")
    u2 = year_2024(llm_db, user="u2", word="Globex")

    def failing_for_globex(body: dict[str, Any]) -> Any:
        return fa.server_error() if "Globex" in body["messages"][0]["content"] else compress_responder(body)

    fake.responder = failing_for_globex
    with _claude(llm_db, max_retries=1) as compressor:  # the SDK retries once, then gives up
        report = run_compress(llm_db, compressor=compressor, embedder=embedder, now=NOW)
    assert report.counts["created"] == 1 and report.counts["failed"] == 1
    assert "u2 2024" in report.errors[0] and len(fake.calls()) == 3
    (first,) = supers(llm_db)
    assert first["user_id"] == "u1" and lineage(llm_db, first["id"]) == u1 and unreachable(llm_db, first["id"], u1) == 0
    assert pointers(llm_db, u2) == [None, None, None]
    with llm_db.admin() as conn:
        assert one(conn.execute("SELECT count(*) AS n FROM episode_lineage WHERE user_id = 'u2'"))["n"] == 0
        assert (
            one(
                conn.execute(
                    "SELECT count(*) AS n FROM episode_events WHERE user_id = 'u2' AND source_event_id IS NOT NULL"
                )
            )["n"]
            == 0
        )
        outcomes = [
            (r["user_id"], r["outcome"]) for r in conn.execute("SELECT user_id, outcome FROM model_calls ORDER BY id")
        ]
        run = one(conn.execute("SELECT status, counts, error FROM job_runs WHERE job = 'compress'"))
    assert sorted(outcomes) == [("u1", "ok"), ("u2", "transient")]
    assert half_written(llm_db) == 0
    assert run["counts"] == {"created": 1, "failed": 1} and "Internal server error" in run["error"]

    fake.responder = compress_responder
    sent = len(fake.calls())
    with _claude(llm_db) as compressor:
        rerun = run_compress(llm_db, compressor=compressor, embedder=embedder, now=NOW)
    assert rerun.counts["created"] == 1 and rerun.counts["unchanged"] == 1
    assert ["Globex" in c.body["messages"][0]["content"] for c in fake.calls()[sent:]] == [True]
    assert next(s["id"] for s in supers(llm_db)) == first["id"]
    second = supers(llm_db)[1]
    assert lineage(llm_db, second["id"]) == u2 and pointers(llm_db, u2) == [second["id"]] * 3
