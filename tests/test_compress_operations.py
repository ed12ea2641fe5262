"""Running compress: one runner at a time, the scheduler's job, the dry-run CLI, purging embeddings, the tenant
filter, months coarsening into a year, recall of a compressed year, and the templates."""

from __future__ import annotations

import datetime as dt

import pytest
from click.testing import CliRunner
from support.compress_checks import (
    NOW,
    YEAR_2024,
    offline,
    pointers,
    snapshot,
)
from support.compress_data import add, supers, year_2024

from jobs.cli import cli
from jobs.compress import (
    RUN_LOCK_KEY,
)
from jobs.db import Database, one
from jobs.embeddings import Embedder
from jobs.errors import CompressBusy
from jobs.models import (
    estimate_tokens,
)
from jobs.prompts import render

# Python logic through the database: runs on one PostgreSQL only; the tests marked citus below are SQL shape.


@pytest.mark.citus  # the run's advisory lock
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


@pytest.mark.citus  # the run's advisory lock
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


@pytest.mark.citus  # the purge UPDATE and the tenant filter
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


@pytest.mark.citus  # pointers across periods
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


@pytest.mark.citus  # recall's SQL over supers
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
