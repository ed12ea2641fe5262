"""Compression after the fact: a late episode rebuilds its period, a group that changes mid-run waits, and an
erasure rebuilds the period with no trace of what it erased."""

from __future__ import annotations

import datetime as dt

import pytest
from support.compress_checks import (
    NOW,
    YEAR_2024,
    delete_episodes,
    half_written,
    lineage,
    offline,
    pointers,
    snapshot,
    unreachable,
)
from support.compress_data import add, supers, year_2024

from jobs.compress import (
    OfflineCompressor,
    Period,
    rebuild_period,
    run_compress,
)
from jobs.db import Database, one
from jobs.embeddings import Embedder

pytestmark = pytest.mark.citus  # runs on one PostgreSQL and on the Citus cluster (conftest)


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
