"""The compress job against a real PostgreSQL, and through the wire (real SDK, fake server) for Claude.

Also home of ``compress_responder``, the fake model for the compress tool (the benchmark runs it in
the fake server's own process: ``--responder test_compress:compress_responder``).
"""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner
from support import fake_anthropic as fa
from support.compress_data import add, supers, year_2024
from support.fake_anthropic import FakeAnthropic

from jobs.cli import cli
from jobs.compress import (
    RUN_LOCK_KEY,
    AnthropicCompressor,
    OfflineCompressor,
    Period,
    cutoff_time,
    parse_age,
    period_floor,
    rebuild_period,
    run_compress,
)
from jobs.compress.run import CompressReport
from jobs.db import Database, one
from jobs.embeddings import Embedder
from jobs.errors import CompressBusy, ConfigError
from jobs.models import (
    estimate_tokens,
)
from jobs.prompts import render
from jobs.sql import query

pytestmark = pytest.mark.citus  # runs on one PostgreSQL and on the Citus cluster (conftest)

NOW = dt.datetime(2026, 11, 21, 12, 0, tzinfo=dt.UTC)
YEAR_2024 = (dt.date(2024, 1, 1), dt.date(2024, 12, 31))

# ------------------------------------------------------------------------------------------------
# The fake model for the compress tool: reads the [E<n>] event lines, summaries, topics and entities
# out of the request and answers with a valid record_period_summary input citing real ids.
# ------------------------------------------------------------------------------------------------

_EVENT = re.compile(
    r"^\[E(\d+)\] (decision|open question|open commitment)(?: \([^)]*\))?(?:, due [0-9-]+)?: (.*)$", re.MULTILINE
)
_SUMMARY = re.compile(r"^Summary: (.*)$", re.MULTILINE)
_TOPICS = re.compile(r"^Topics: (.*)$", re.MULTILINE)
_ENTITIES = re.compile(r"^Entities: (.*)$", re.MULTILINE)
_ENTITY = re.compile(r"^(.+) \((person|org|product|project|place|other)\)$")


def compress_responder(body: dict[str, Any]) -> dict[str, Any]:
    text = body["messages"][0]["content"]
    events = _EVENT.findall(text)
    tags = Counter(t.strip() for line in _TOPICS.findall(text) for t in line.split(","))
    entities: dict[str, str] = {}
    for line in _ENTITIES.findall(text):
        for item in line.split(", "):
            match = _ENTITY.match(item.strip())
            if match:
                entities.setdefault(match.group(1), match.group(2))
    summaries = _SUMMARY.findall(text)
    return {
        "summary": ("Over the period the user " + "; then ".join(s[:60] for s in summaries[:3]))[:1500],
        "topic_tags": [t for t, _ in tags.most_common(3)],
        "key_events": [{"source": f"E{i}", "what": f"Restated {label}: {what}"[:400]} for i, label, what in events[:3]],
        "entities": [{"name": n, "kind": k} for n, k in list(entities.items())[:10]],
        "importance": 0.7,
    }


# ------------------------------------------------------------------------------------------------
# Fixtures and helpers
# ------------------------------------------------------------------------------------------------


@pytest.fixture
def fake() -> Iterator[fa.FakeAnthropic]:
    with fa.FakeAnthropic(responder=compress_responder) as server:
        yield server


TABLES = ("episodes", "episode_events", "episode_entities", "episode_lineage", "model_calls", "transcripts")


def snapshot(db: Database) -> dict[str, str]:
    """Every row of every data table, as text (job_runs, the run history, is expected to grow)."""
    with db.admin() as conn:
        return {
            t: one(conn.execute(f"SELECT coalesce(json_agg(x ORDER BY x::text)::text, '[]') AS j FROM {t} x"))["j"]
            for t in TABLES
        }


def lineage(db: Database, super_id: int) -> list[int]:
    with db.admin() as conn:
        return [
            r["source_episode_id"]
            for r in conn.execute(
                "SELECT source_episode_id FROM episode_lineage WHERE super_episode_id = %s ORDER BY 1", (super_id,)
            )
        ]


def delete_episodes(db: Database, ids: list[int], tenant: str = "acme") -> None:
    """What an erasure does to episodes: what points at them is released first (migration 0016's
    NO ACTION keys), then they go; their events, entities and lineage rows cascade."""
    with db.tenant(tenant) as conn:
        conn.execute(query("release_references"), {"tenant_id": tenant, "ids": ids})
        conn.execute("DELETE FROM episodes WHERE tenant_id = %s AND id = ANY(%s)", (tenant, ids))


def pointers(db: Database, ids: list[int]) -> list[int | None]:
    with db.admin() as conn:
        return [
            r["compressed_into"]
            for r in conn.execute("SELECT compressed_into FROM episodes WHERE id = ANY(%s) ORDER BY id", (ids,))
        ]


def unreachable(db: Database, super_id: int, source_ids: list[int]) -> int:
    """Decisions and open questions / commitments of the sources that no event of the super cites."""
    with db.admin() as conn:
        return int(
            one(
                conn.execute(
                    "SELECT count(*) AS n FROM episode_events src WHERE src.episode_id = ANY(%s) "
                    "AND (src.type = 'decision' OR (src.type IN ('open_question', 'commitment') AND src.status = 'open')) "
                    "AND NOT EXISTS (SELECT 1 FROM episode_events s WHERE s.tenant_id = src.tenant_id AND s.episode_id = %s "
                    "AND s.source_event_id = src.id)",
                    (source_ids, super_id),
                )
            )["n"]
        )


def _claude(db: Database, **changes: Any) -> AnthropicCompressor:
    """A Claude compressor on the fake server (use it in a with block, which closes it)."""
    return AnthropicCompressor(db.settings.with_(**changes))


def half_written(db: Database) -> int:
    """Supers missing their lineage or their events."""
    with db.admin() as conn:
        return int(
            one(
                conn.execute(
                    "SELECT count(*) AS n FROM episodes s WHERE s.kind = 'super' AND ("
                    "(SELECT count(*) FROM episode_lineage l WHERE l.tenant_id = s.tenant_id AND l.super_episode_id = s.id) < 2 "
                    "OR NOT EXISTS (SELECT 1 FROM episode_events e WHERE e.tenant_id = s.tenant_id AND e.episode_id = s.id))"
                )
            )["n"]
        )


def offline(db: Database, embedder: Embedder, **kwargs: Any) -> CompressReport:
    return run_compress(db, compressor=OfflineCompressor(embedder), embedder=embedder, now=NOW, **kwargs)


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


def test_a_late_episode_rebuilds_its_period_instead_of_adding_a_second(db: Database, embedder: Embedder) -> None:
    sources = year_2024(db, embedder)
    offline(db, embedder)
    (old,) = supers(db)
    late = add(
        db,
        "2024-12-30T10:00",
        "Maria asked for a renewal quote.",
        embedder=embedder,
        events=(("open_question", "Maria asked whether the renewal price is fixed."),),
    )
    plan = run_compress(db, now=NOW, dry_run=True)
    assert plan.counts["rebuilt"] == 1 and plan.planned[0].source_ids == (*sources, late)
    assert [s["id"] for s in supers(db)] == [old["id"]]  # a dry run changes nothing
    report = offline(db, embedder)
    assert report.counts["rebuilt"] == 1 and report.sources == 4
    (new,) = supers(db)
    (superseded,) = supers(db, "superseded")
    assert superseded["id"] == old["id"] and superseded["superseded_by"] == new["id"]
    assert lineage(db, new["id"]) == [*sources, late] and lineage(db, old["id"]) == sources
    assert pointers(db, [*sources, late]) == [new["id"]] * 4
    assert unreachable(db, new["id"], [*sources, late]) == 0
    before = snapshot(db)
    assert offline(db, embedder).counts["unchanged"] == 1 and snapshot(db) == before


def test_a_group_that_changes_while_it_is_compressed_is_left_for_the_next_run(db: Database, embedder: Embedder) -> None:
    from jobs.compress import embed_prepared, prepare_group, write_group

    sources = year_2024(db, embedder)
    prep = prepare_group(
        db, "acme", "u1", Period.of("year", dt.date(2024, 1, 1)), compressor=lambda: OfflineCompressor(embedder)
    )
    late = add(db, "2024-12-01T10:00", "Maria came back about the invoice.", embedder=embedder)  # summarize, meanwhile
    (vector,) = embed_prepared(db, [prep], lambda: embedder)
    assert write_group(db, prep, vector).outcome == "changed"
    assert supers(db) == [] and pointers(db, [*sources, late]) == [None] * 4
    assert offline(db, embedder).counts["created"] == 1
    (sup,) = supers(db)
    assert lineage(db, sup["id"]) == [*sources, late] and half_written(db) == 0


def test_rebuild_period_after_an_erasure_leaves_no_trace_of_the_erased_source(db: Database, embedder: Embedder) -> None:
    keep = year_2024(db, embedder)
    secret = add(
        db,
        "2024-08-01T10:00",
        "Maria mentioned her SECRET-PROJECT.",
        embedder=embedder,
        events=(("decision", "Maria chose SECRET-PROJECT."),),
        entities=(("SECRET-PROJECT", "project"),),
    )
    offline(db, embedder)
    late = add(db, "2024-12-01T10:00", "Maria came back about the invoice.", embedder=embedder)
    offline(db, embedder)  # the first super is kept as superseded (audit), the second is current
    (old,) = supers(db)
    with db.admin() as conn:
        carried = one(
            conn.execute(
                "SELECT count(*) AS n FROM episode_events WHERE what LIKE '%%SECRET%%' AND source_event_id IS NOT NULL"
            )
        )["n"]
    assert carried == 2 and secret in lineage(db, old["id"]) and len(supers(db, "superseded")) == 1
    delete_episodes(db, [secret])  # what an erasure does to the source
    outcome = rebuild_period(db, "acme", "u1", *YEAR_2024, compressor=OfflineCompressor(embedder), embedder=embedder)
    assert outcome == "rebuilt"
    (new,) = supers(db)
    keep = [*keep, late]
    assert lineage(db, new["id"]) == keep and supers(db, "superseded") == []  # both old supers are gone
    with db.admin() as conn:
        leftovers = one(
            conn.execute(
                "SELECT (SELECT count(*) FROM episodes WHERE summary LIKE '%%SECRET%%') + "
                "(SELECT count(*) FROM episode_events WHERE what LIKE '%%SECRET%%') + "
                "(SELECT count(*) FROM episode_entities WHERE name LIKE '%%SECRET%%') AS n"
            )
        )["n"]
    assert leftovers == 0
    assert rebuild_period(db, "acme", "u1", *YEAR_2024, compressor=OfflineCompressor(embedder)) == "unchanged"

    delete_episodes(db, keep[:3])
    assert rebuild_period(db, "acme", "u1", *YEAR_2024) == "removed"
    assert supers(db) == [] and pointers(db, keep[3:]) == [None]
    assert rebuild_period(db, "acme", "u1", *YEAR_2024) == "uncompressed"


def test_erasing_an_old_version_of_a_session_removes_the_audit_copy_that_held_it(
    db: Database, embedder: Embedder
) -> None:
    first, second, third = year_2024(db, embedder)
    offline(db, embedder)
    (audit,) = supers(db)
    with db.tenant("acme") as conn:  # the session is summarised again: the old version is superseded
        conn.execute("UPDATE episodes SET status = 'superseded' WHERE id = %s", (second,))
    again = add(db, "2024-06-10T10:00", "Maria planned the rollout again.", embedder=embedder)
    assert offline(db, embedder).counts["rebuilt"] == 1
    (current,) = supers(db)
    assert [s["id"] for s in supers(db, "superseded")] == [audit["id"]]
    delete_episodes(db, [second])  # the erasure deletes the old version, which only the audit copy held
    assert rebuild_period(db, "acme", "u1", *YEAR_2024) == "unchanged"
    assert supers(db, "superseded") == [] and [s["id"] for s in supers(db)] == [current["id"]]
    assert lineage(db, current["id"]) == [first, third, again]


def test_one_runner_at_a_time(db: Database, embedder: Embedder) -> None:
    year_2024(db)
    with db.connect(autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s)", (RUN_LOCK_KEY,))
        with pytest.raises(CompressBusy, match="Another compress run is in progress"):
            offline(db, embedder)
        result = CliRunner().invoke(cli, ["compress", "--extractor", "offline", "--now", "2026-11-21"])
        assert result.exit_code == 1
        assert result.stderr.strip().splitlines()[-1].startswith("episodes: Another compress run is in progress")
        assert supers(db) == []
    cli_run = CliRunner().invoke(cli, ["compress", "--extractor", "offline", "--now", "2026-11-21"])
    assert cli_run.exit_code == 0, cli_run.output
    assert "created 1" in cli_run.stdout and len(supers(db)) == 1


def test_the_scheduler_job_returns_counts_and_steps_aside_for_a_running_compress(
    db: Database, embedder: Embedder
) -> None:
    from jobs.compress import scheduled_compress

    with db.connect(autocommit=True) as other:  # e.g. `episodes compress` from a shell
        other.execute("SELECT pg_advisory_lock(%s)", (RUN_LOCK_KEY,))
        assert scheduled_compress(db) == {"busy": 1}
    ids = [add(db, f"2019-0{m}-01T10:00", f"Maria's session in month {m}.", embedder=embedder) for m in (3, 4, 5)]
    assert scheduled_compress(db) == {"created": 1, "sessions": 3, "model_calls": 0, "input_tokens": 0}
    (sup,) = supers(db)
    assert sup["model"] == "offline" and pointers(db, ids) == [sup["id"]] * 3  # no API key: offline
    with db.admin() as conn:  # the scheduler records the run itself
        assert one(conn.execute("SELECT count(*) AS n FROM job_runs"))["n"] == 0


def test_dry_run_cli_lists_the_plan_and_changes_nothing(db: Database, embedder: Embedder) -> None:
    year_2024(db, embedder)
    year_2024(db, embedder, user="u2")
    before = snapshot(db)
    result = CliRunner().invoke(cli, ["compress", "--dry-run", "--now", "2026-11-21", "--user", "u2"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0].split() == ["would", "create", "acme", "u2", "2024", "(3", "sessions)"]
    assert "would be created 1" in result.stdout and snapshot(db) == before
    help_text = CliRunner().invoke(cli, ["compress", "--help"]).stdout
    assert "--purge-embeddings" in help_text and "re-embed" in help_text


def test_purge_embeddings_and_the_tenant_filter(db: Database, embedder: Embedder) -> None:
    acme = year_2024(db, embedder)
    globex = year_2024(db, embedder, tenant="globex")
    report = offline(db, embedder, tenant="acme", purge_embeddings=True)
    assert report.counts["created"] == 1 and report.purged == 3
    (sup,) = supers(db)
    assert sup["tenant_id"] == "acme" and sup["embedding"] is not None
    with db.admin() as conn:
        vectors = {
            r["id"]: r["embedding"] for r in conn.execute("SELECT id, embedding FROM episodes WHERE kind = 'session'")
        }
    assert all(vectors[i] is None for i in acme) and all(vectors[i] is not None for i in globex)
    assert pointers(db, globex) == [None] * 3
    again = offline(db, embedder, tenant="acme", purge_embeddings=True)
    assert again.purged == 0 and again.counts["unchanged"] == 1


def test_months_then_a_year_coarsens_and_months_again_leave_the_year_alone(db: Database, embedder: Embedder) -> None:
    jan = [
        add(db, "2024-01-05T10:00", "January one.", embedder=embedder),
        add(db, "2024-01-20T10:00", "January two.", embedder=embedder),
    ]
    mar = [
        add(db, "2024-03-05T10:00", "March one.", embedder=embedder),
        add(db, "2024-03-25T10:00", "March two.", embedder=embedder),
    ]
    lone = add(db, "2024-07-01T10:00", "July alone.", embedder=embedder)
    assert offline(db, embedder, period="month").counts["created"] == 2
    months = supers(db)
    assert [(s["period_start"], s["period_end"]) for s in months] == [
        (dt.date(2024, 1, 1), dt.date(2024, 1, 31)),
        (dt.date(2024, 3, 1), dt.date(2024, 3, 31)),
    ]
    assert pointers(db, [*jan, *mar, lone]) == [months[0]["id"]] * 2 + [months[1]["id"]] * 2 + [None]
    assert offline(db, embedder).counts["rebuilt"] == 1
    (year,) = supers(db)
    assert (year["period_start"], year["period_end"]) == YEAR_2024
    assert {s["superseded_by"] for s in supers(db, "superseded")} == {year["id"]}
    before = snapshot(db)
    again = offline(db, embedder, period="month")
    assert again.counts["skipped"] == 3 and again.counts["created"] == 0 and snapshot(db) == before


def test_recall_shows_the_super_summary_for_a_compressed_year_within_budget(db: Database, embedder: Embedder) -> None:
    from jobs import recall

    sources = year_2024(db, embedder)
    recent = [
        add(db, "2026-10-01T10:00", "Maria asked about the API rate limits.", embedder=embedder),
        add(db, "2026-11-01T10:00", "Maria set up webhooks.", embedder=embedder),
    ]
    offline(db, embedder)
    (sup,) = supers(db)
    # The 2024 items are stale by 2026: the message mentions annual billing, so the question about it is listed.
    result = recall.Recaller(db, embedder).recall(
        "acme", "u1", "What did we decide about the Acme pricing plan and annual billing?", budget_tokens=400, now=NOW
    )
    ids = [ep.id for ep in result.episodes]
    assert sup["id"] in ids and not set(sources) & set(ids) and set(recent) <= set(ids)
    assert next(ep for ep in result.episodes if ep.id == sup["id"]).kind == "super"
    block = result.render()
    assert "2024-01-01 to 2024-12-31" in block and estimate_tokens(block) <= 400
    assert {item.episode_id for item in result.open_items} == {sup["id"]}  # open items live on in the super
    assert [item.what for item in result.open_items] == ["Maria asked whether annual billing has a discount."]


def test_compress_templates_render_with_a_sample_context() -> None:
    from jobs.compress.claude import _Block, _EventView

    block = _Block(
        summary="Maria chose a plan.",
        topic_tags=["pricing"],
        entities=["Maria (person)"],
        id=7,
        date="2024-01-02",
        purpose="support",
        importance=0.5,
        first="2024-01-02",
        last="2024-02-03",
        sessions=2,
        events=[_EventView(3, "decision", "Maria", dt.date(2024, 2, 1), "Maria chose X.")],
    )
    system = render("compress_system.j2", tool_name="record_period_summary")
    sessions = render(
        "compress_sessions_user.j2",
        tool_name="t",
        part_number=1,
        part_count=2,
        period="2024",
        session_count=2,
        episodes=[block],
    )
    reduce = render("compress_reduce_user.j2", tool_name="t", period="2024", session_count=2, partials=[block])
    assert "record_period_summary" in system and "E123" in system
    assert "[E3] decision (Maria), due 2024-02-01: Maria chose X." in sessions and "part 1 of 2" in sessions
    assert '<partial from="2024-01-02" to="2024-02-03" sessions="2">' in reduce
