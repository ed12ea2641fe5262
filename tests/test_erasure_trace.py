"""What an erasure leaves in the database's files and statistics (jobs/rights/vacuum.py): after
`episodes forget` the tables it changed are vacuumed and analysed, so no erased value is left in
pg_stats; with --vacuum-full no byte of the erased rows is left in the tables' or indexes' files."""

from __future__ import annotations

import glob
import os
from pathlib import Path

import numpy as np
import psycopg
import pytest
from click.testing import CliRunner
from support.recall_rows import episode_row, unit

from jobs.cli import cli
from jobs.db import SERVICE_ROLE, Database, one
from jobs.rights.vacuum import ERASED_TABLES, vacuum_after_erasure
from jobs.store import insert_episode

GONE = "gone-zqxv"  # the erased user's id, and a word of each of their summaries
MARK = "zqxmarkerzqx"


def populate(db: Database) -> None:
    """50 episodes of the user to erase and 50 of another, then ANALYZE: the erased user's id is one of
    the two most common values of every user_id column."""
    rng = np.random.default_rng(5)
    with db.tenant("acme") as conn:
        for user, word in ((GONE, MARK), ("stay", "keeper")):
            for i in range(50):
                insert_episode(
                    conn,
                    episode_row(
                        f"{word} summary {i} about the quarterly budget",
                        user=user,
                        days_ago=i + 1,
                        vector=unit(rng),
                        events=[("decision", f"{word} decided item {i}")],
                    ),
                )
    with db.connect(autocommit=True) as conn:
        conn.execute("ANALYZE")


def sampled(db: Database, needle: str) -> list[str]:
    """The columns of the erasure's tables whose pg_stats sample holds ``needle``."""
    with db.admin() as conn:
        return [
            f"{r['tablename']}.{r['attname']}"
            for r in conn.execute(
                "SELECT tablename, attname FROM pg_stats WHERE schemaname = current_schema() AND tablename = ANY(%s) "
                "AND (strpos(most_common_vals::text, %s) > 0 OR strpos(histogram_bounds::text, %s) > 0)",
                (list(ERASED_TABLES), needle, needle),
            )
        ]


def file_hits(db: Database, table: str, needle: str) -> dict[str, int]:
    """How often ``needle``'s bytes occur in the files of ``table``, its TOAST table and its indexes
    (after a CHECKPOINT, so what is in shared buffers is on disk)."""
    with db.admin() as conn:
        conn.execute("CHECKPOINT")
        base = one(conn.execute("SELECT current_setting('data_directory') AS d"))["d"]
        relations = conn.execute(
            "SELECT c.relname, pg_relation_filepath(c.oid) AS path FROM pg_class c "
            "WHERE c.oid = %(t)s::regclass OR c.oid = (SELECT reltoastrelid FROM pg_class WHERE oid = %(t)s::regclass) "
            "OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = %(t)s::regclass)",
            {"t": table},
        ).fetchall()
    hits = {}
    for relation in relations:
        segments = glob.glob(os.path.join(base, relation["path"])) + glob.glob(
            os.path.join(base, relation["path"]) + ".*"
        )
        hits[relation["relname"]] = sum(
            Path(f).read_bytes().count(needle.encode()) for f in segments if not f.endswith(("_fsm", "_vm"))
        )
    return hits


def forget(db: Database, monkeypatch: pytest.MonkeyPatch, *options: str) -> str:
    monkeypatch.setenv("DATABASE_URL", db.url)
    result = CliRunner().invoke(cli, ["forget", "--tenant", "acme", "--user", GONE, *options])
    assert result.exit_code == 0, result.output
    return result.output


def test_forget_vacuums_and_analyses_so_no_erased_value_stays_in_pg_stats(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    populate(db)
    assert "episodes.user_id" in sampled(db, GONE) and "episode_events.user_id" in sampled(db, GONE)
    out = forget(db, monkeypatch)
    assert f"vacuumed and analysed {len(ERASED_TABLES)} tables the erasure changed" in out, out
    assert sampled(db, GONE) == [] and sampled(db, MARK) == []
    with db.admin() as conn:
        stats = {
            r["relname"]: r
            for r in conn.execute(
                "SELECT relname, last_vacuum, last_analyze FROM pg_stat_user_tables WHERE relname = ANY(%s)",
                (list(ERASED_TABLES),),
            )
        }
    assert set(stats) == set(ERASED_TABLES)
    # (n_dead_tup is no measure here: a backend's counts reach the statistics up to seconds after its commit)
    assert all(s["last_vacuum"] is not None and s["last_analyze"] is not None for s in stats.values()), stats


def test_no_vacuum_leaves_it_for_episodes_vacuum(db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    populate(db)
    out = forget(db, monkeypatch, "--no-vacuum")
    assert "vacuumed" not in out
    assert "episodes.user_id" in sampled(db, GONE)  # the sample still names the erased user
    result = CliRunner().invoke(cli, ["vacuum"])
    assert result.exit_code == 0 and "vacuumed and analysed" in result.output, result.output
    assert sampled(db, GONE) == []


def test_only_vacuum_full_leaves_no_erased_byte_in_the_files(db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    """Measured, and what the README says: after a plain VACUUM the erased summaries' bytes are still in the
    heap's freed space and the GIN index keeps the erased words as keys; VACUUM FULL leaves none."""
    populate(db)
    forget(db, monkeypatch)
    after_vacuum = file_hits(db, "episodes", MARK)
    assert after_vacuum["episodes"] > 0 and after_vacuum["episodes_search_idx"] > 0, after_vacuum  # else: README
    forget(db, monkeypatch, "--vacuum-full")  # nothing left to erase; the tables are rewritten
    for table in ("episodes", "episode_events"):
        assert not any(file_hits(db, table, MARK).values()), table


@pytest.mark.citus
def test_vacuum_runs_on_every_backend(db: Database) -> None:
    """One PostgreSQL and a Citus coordinator (which runs it on the shards) alike: every table done, none skipped."""
    populate(db)
    done = vacuum_after_erasure(db)
    assert (sorted(done.tables), done.skipped) == (sorted(ERASED_TABLES), {})


def test_a_role_that_may_not_vacuum_is_told_to_run_episodes_vacuum(db: Database) -> None:
    """The service's login role owns no table: PostgreSQL skips each with a warning; nothing is raised, every
    table is reported skipped, and the line says what to run."""
    info = psycopg.conninfo.conninfo_to_dict(db.url)
    info["user"] = SERVICE_ROLE
    info.pop("password", None)
    service = Database(db.settings, psycopg.conninfo.make_conninfo("", **info))
    try:
        done = vacuum_after_erasure(service)
    finally:
        service.close()
    assert done.tables == [] and sorted(done.skipped) == sorted(ERASED_TABLES)
    assert "run `episodes vacuum` as the tables' owner" in done.line()
