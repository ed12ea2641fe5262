"""Migrations: numbered, contiguous, each applied with its record in one transaction, idempotent."""

from __future__ import annotations

import datetime as dt
import os
import re
from typing import Any

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector
from psycopg.rows import dict_row
from support.databases import migrations_up_to

from jobs import migrate
from jobs.citus import cluster
from jobs.db import one
from jobs.errors import EmbeddingDimensionMismatch, SchemaTooNew
from jobs.recall import RecallConfig
from jobs.recall.scoring import read_scores, send_scores
from jobs.resources import sql_dir
from jobs.sql import query


def test_names_are_unique_and_contiguous() -> None:
    files = sorted(p.name for p in (sql_dir() / "migrations").iterdir() if p.name.endswith(".sql"))
    assert files, "no migrations found"
    for name in files:
        assert re.match(r"^\d{4}_[a-z0-9_]+\.sql$", name), name
    versions = [int(name[:4]) for name in files]
    assert len(set(versions)) == len(versions), "two migrations share a number"
    assert versions == list(range(1, len(versions) + 1)), "migration numbers must be contiguous from 0001"


def test_blank_database_migrates_and_second_run_is_noop(blank_db_url: str) -> None:
    with psycopg.connect(blank_db_url) as conn:
        applied = migrate.migrate(conn, embedding_dim=384, embedder="test")
        assert [m.version for m in applied] == [m.version for m in migrate.available()]
        assert migrate.current_version(conn) == migrate.code_version()
        tables = {r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
        assert {
            "transcripts",
            "episodes",
            "episode_events",
            "episode_entities",
            "episode_lineage",
            "job_runs",
            "model_calls",
            "event_types",
        } <= tables
        dim = one(
            conn.execute(
                "SELECT atttypmod FROM pg_attribute WHERE attrelid = 'episodes'::regclass AND attname = 'embedding'"
            )
        )[0]
        assert dim == 384
        before = one(conn.execute("SELECT count(*) FROM schema_migrations"))[0]
        assert migrate.migrate(conn, embedding_dim=384, embedder="test") == []
        assert one(conn.execute("SELECT count(*) FROM schema_migrations"))[0] == before


def test_embedding_dimension_is_chosen_at_init(blank_db_url: str) -> None:
    with psycopg.connect(blank_db_url) as conn:
        migrate.migrate(conn, embedding_dim=16, embedder="tiny")
        typmod = one(
            conn.execute(
                "SELECT atttypmod FROM pg_attribute WHERE attrelid = 'episodes'::regclass AND attname = 'embedding'"
            )
        )[0]
        assert typmod == 16
        with pytest.raises(EmbeddingDimensionMismatch, match="16-dimensional"):
            migrate.migrate(conn, embedding_dim=384, embedder="other")


def test_schema_newer_than_code_stops_with_clear_message(blank_db_url: str) -> None:
    with psycopg.connect(blank_db_url) as conn:
        migrate.migrate(conn, embedding_dim=384, embedder="test")
        conn.execute("INSERT INTO schema_migrations (version, name) VALUES (9999, 'from_the_future')")
        with pytest.raises(SchemaTooNew, match="Upgrade episodes"):
            migrate.migrate(conn, embedding_dim=384, embedder="test")


def test_failed_migration_leaves_previous_version(blank_db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    good = migrate.available()
    broken = migrate.Migration(len(good) + 1, "broken", "CREATE TABLE half_done (x int); SELECT 1/0;")
    monkeypatch.setattr(migrate, "available", lambda: [*good, broken])
    with psycopg.connect(blank_db_url) as conn:
        with pytest.raises(psycopg.errors.DivisionByZero):
            migrate.migrate(conn, embedding_dim=384, embedder="test")
        assert migrate.current_version(conn) == len(good)
        assert one(conn.execute("SELECT to_regclass('half_done')"))[0] is None


def test_upgrade_to_distributable_keys_keeps_the_data(blank_db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """0016 rewrites ids and keys on a database with data: every row stays, the references
    still hold (now as keys with tenant_id), and new ids follow the old ones."""
    everything = migrate.available()
    with psycopg.connect(blank_db_url) as conn:
        monkeypatch.setattr(migrate, "available", lambda: [m for m in everything if m.version < 16])
        migrate.migrate(conn, embedding_dim=3, embedder="tiny")
        with conn.transaction():
            t = one(
                conn.execute(
                    "INSERT INTO transcripts (tenant_id, user_id, session_id, messages, content_hash, ended_at) "
                    "VALUES ('acme', 'u1', 's1', '[{\"role\": \"user\", \"content\": \"hi\"}]', 'h', now()) "
                    "RETURNING id"
                )
            )[0]
            ids = [
                one(
                    conn.execute(
                        "INSERT INTO episodes (tenant_id, user_id, kind, transcript_id, session_id, summary, importance, "
                        "started_at, ended_at, model, prompt_version, status, period_start, period_end, embedding) "
                        "VALUES ('acme', 'u1', %s, %s, %s, %s, 0.5, now(), now(), 'm', 'p', %s, %s, %s, '[1,0,0]') RETURNING id",
                        (
                            kind,
                            t if kind == "session" else None,
                            session,
                            summary,
                            status,
                            None if kind == "session" else "2025-01-01",
                            None if kind == "session" else "2025-12-31",
                        ),
                    )
                )[0]
                for kind, session, summary, status in (
                    ("session", "s0", "old take", "superseded"),
                    ("session", "s1", "new take", "current"),
                    ("super", None, "the year", "current"),
                )
            ]
            old, new, year = ids
            conn.execute("UPDATE episodes SET superseded_by = %s WHERE id = %s", (new, old))
            conn.execute("UPDATE episodes SET compressed_into = %s WHERE id = %s", (year, new))
            conn.execute("INSERT INTO episode_lineage VALUES ('acme', 'u1', %s, %s)", (year, new))
            conn.execute(
                "INSERT INTO episode_events (tenant_id, user_id, episode_id, ordinal, type, what, occurred_at, "
                "evidence, resolved_by) VALUES ('acme', 'u1', %s, 0, 'open_question', 'which plan?', now(), "
                "'{0}', %s)",
                (old, new),
            )
        before = {
            table: one(conn.execute(f"SELECT count(*) FROM {table}"))[0]
            for table in ("transcripts", "episodes", "episode_events", "episode_lineage")
        }

        monkeypatch.setattr(migrate, "available", lambda: everything)
        assert next(m.version for m in migrate.migrate(conn, embedding_dim=3, embedder="tiny")) == 16
        after = {table: one(conn.execute(f"SELECT count(*) FROM {table}"))[0] for table in before}
        assert after == before
        assert conn.execute("SELECT superseded_by, compressed_into FROM episodes WHERE id = %s", (old,)).fetchone() == (
            new,
            None,
        )
        keys = {
            r[0]: r[1]
            for r in conn.execute(
                "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = 'episodes'::regclass"
            )
        }
        assert keys["episodes_pkey"] == "PRIMARY KEY (tenant_id, id)"
        assert keys["episodes_superseded_by_fkey"].startswith("FOREIGN KEY (tenant_id, superseded_by)")
        assert not one(
            conn.execute(
                "SELECT count(*) FROM pg_attribute WHERE attidentity <> '' AND attnum > 0 "
                "AND attrelid::regclass::text IN ('episodes', 'transcripts')"
            )
        )[0]
        register_vector(conn)
        asked = {
            "tenant_id": "acme",
            "user_id": "u1",
            "now": dt.datetime.now(dt.UTC),
            "purposes": None,
            "query_text": "plan",
        }
        with conn.transaction():
            first_read = read_scores(
                send_scores(
                    conn.cursor(row_factory=dict_row), query, asked, np.ones(384, np.float32), RecallConfig(), ()
                )
            )
        assert first_read.candidates == 1  # recall scores the candidate written before the upgrade (the year)
        with conn.transaction():
            fresh = one(
                conn.execute(
                    "INSERT INTO episodes (tenant_id, user_id, kind, session_id, summary, importance, started_at, "
                    "ended_at, model, prompt_version) VALUES ('acme', 'u1', 'session', 's2', 'later', 0.5, now(), now(), "
                    "'m', 'p') RETURNING id"
                )
            )[0]
        assert fresh > year  # ids continue
        with pytest.raises(psycopg.errors.ForeignKeyViolation):  # no reference is silently left dangling
            with conn.transaction():
                conn.execute("DELETE FROM episodes WHERE id = %s", (year,))
        with conn.transaction():  # the way every deleting path goes: release, then delete
            conn.execute("SELECT episodes_release_references('acme', %s)", ([year],))
            conn.execute("DELETE FROM episodes WHERE id = %s", (year,))
        assert one(conn.execute("SELECT compressed_into FROM episodes WHERE id = %s", (new,)))[0] is None


# What migration 0035 drops: the recall copy's tables, functions, triggers, index and column.
RECALL_COPY_TABLES = ("recall_versions", "recall_packs")
RECALL_COPY_FUNCTIONS = (
    "episodes_bump_version",
    "episodes_drop_pack",
    "episodes_pack_at_version",
    "episodes_counter_drop_pack",
    "episodes_stamp_change",
    "episodes_note_delete",
    "episodes_keep_search_tf",
    "episodes_search_tf",
)
# The rows a database at 0034 holds, as they read (search_tf, the dropped column, left out).
SNAPSHOT = {
    "transcripts": "SELECT to_jsonb(t) FROM transcripts t ORDER BY tenant_id, id",
    "episodes": "SELECT to_jsonb(e) - 'search_tf' FROM episodes e ORDER BY tenant_id, id",
    "episode_events": "SELECT to_jsonb(v) FROM episode_events v ORDER BY tenant_id, id",
    "episode_entities": "SELECT to_jsonb(n) FROM episode_entities n ORDER BY tenant_id, id",
}


def _fill_at_0034(conn: psycopg.Connection[Any]) -> None:
    """Two tenants' transcripts, episodes (one updated twice, as corrections do), events and entities."""
    with conn.transaction():
        for tenant in ("acme", "globex"):
            transcript = one(
                conn.execute(
                    "INSERT INTO transcripts (tenant_id, user_id, session_id, messages, ended_at) "
                    'VALUES (%s, \'u1\', \'s1\', \'[{"role": "user", "content": "SSO for Snowflake?"}]\', '
                    "'2025-03-01') RETURNING id",
                    (tenant,),
                )
            )[0]
            for n in range(3):
                episode = one(
                    conn.execute(
                        "INSERT INTO episodes (tenant_id, user_id, kind, transcript_id, session_id, summary, importance, "
                        "started_at, ended_at, model, prompt_version, embedding, search_tsv) VALUES (%s, 'u1', 'session', "
                        "%s, %s, %s, 0.5, '2025-03-01', '2025-03-01', 'm', 'p', '[1,0,0]', to_tsvector('english', %s)) "
                        "RETURNING id",
                        (tenant, transcript, f"s{n}", f"Maria asked about SSO {n}", f"Maria asked about SSO {n}"),
                    )
                )[0]
                conn.execute(
                    "INSERT INTO episode_events (tenant_id, user_id, episode_id, ordinal, type, what, occurred_at, "
                    "evidence) VALUES (%s, 'u1', %s, 0, 'decision', 'SSO is in the renewal', '2025-03-01', '{0}')",
                    (tenant, episode),
                )
                conn.execute(
                    "INSERT INTO episode_entities (tenant_id, user_id, episode_id, name, kind) "
                    "VALUES (%s, 'u1', %s, 'Snowflake', 'product')",
                    (tenant, episode),
                )
    for summary in ("Maria asked about SSO, corrected", "Maria asked about SSO, corrected again"):
        with conn.transaction():
            conn.execute("UPDATE episodes SET summary = %s WHERE tenant_id = 'acme' AND session_id = 's0'", (summary,))


def _snapshot(conn: psycopg.Connection[Any]) -> dict[str, list[Any]]:
    return {table: [r[0] for r in conn.execute(statement)] for table, statement in SNAPSHOT.items()}


def _upgrade_to_0035_keeps_the_rows(conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """The database at 0034 (filled by _fill_at_0034) migrated: the rows read as before, the recall copy's
    objects are gone, and changed_version counts each row's updates from the value it had."""
    before = _snapshot(conn)
    counts = dict(conn.execute("SELECT session_id, changed_version FROM episodes WHERE tenant_id = 'acme'").fetchall())
    assert counts["s0"] > counts["s1"] > 0  # the old counter stamped them; the updates moved s0's
    assert conn.execute("SELECT count(*) FROM recall_versions").fetchone() == (2,)
    # 0035 alone (from the shipped list: `available` is patched to stop at 0034 here); later migrations have
    # their own tests.
    monkeypatch.setattr(migrate, "available", lambda: [m for m in migrate._shipped() if m.version <= 35])
    assert [m.version for m in migrate.migrate(conn, embedding_dim=3, embedder="tiny")] == [35]
    assert _snapshot(conn) == before
    gone = conn.execute(
        "SELECT array_remove(ARRAY[to_regclass('recall_versions')::text, to_regclass('recall_packs')::text, "
        "to_regclass('episodes_user_changed_idx')::text], NULL)"
    ).fetchone()
    assert gone == ([],)
    functions = {
        r[0]
        for r in conn.execute("SELECT proname FROM pg_proc WHERE proname = ANY (%s)", (list(RECALL_COPY_FUNCTIONS),))
    }
    assert functions == set()
    columns = conn.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = 'episodes'::regclass AND attname IN ('search_tf', "
        "'changed_version') AND NOT attisdropped"
    ).fetchall()
    assert columns == [("changed_version",)]
    triggers = {r[0] for r in conn.execute("SELECT tgname FROM pg_trigger WHERE tgrelid = 'episodes'::regclass")}
    assert triggers & {"episodes_stamp_change", "episodes_note_delete", "episodes_keep_search_tf"} == set()
    # The tenant role writes as before; an update counts from the row's old value, an insert starts at 0.
    with conn.transaction():
        conn.execute("SET LOCAL ROLE episodes_app")
        conn.execute("SET LOCAL episodes.tenant_id = 'acme'")
        conn.execute("UPDATE episodes SET importance = 0.9 WHERE tenant_id = 'acme' AND session_id IN ('s0', 's1')")
        conn.execute(
            "INSERT INTO episodes (tenant_id, user_id, kind, session_id, summary, importance, started_at, ended_at, "
            "model, prompt_version) VALUES ('acme', 'u1', 'session', 's9', 'later', 0.5, now(), now(), 'm', 'p')"
        )
        conn.execute("DELETE FROM episodes WHERE tenant_id = 'acme' AND session_id = 's9'")  # no counter to move
        after = dict(
            conn.execute("SELECT session_id, changed_version FROM episodes WHERE tenant_id = 'acme'").fetchall()
        )
    assert after == {"s0": counts["s0"] + 1, "s1": counts["s1"] + 1, "s2": counts["s2"]}
    # The analyst views were re-created over the schema without what went.
    analyst_rows = conn.execute("SELECT count(*) FROM analyst.decisions").fetchone()
    assert analyst_rows is not None and analyst_rows[0] == 6


def test_upgrade_0034_to_0035_drops_the_recall_copy_and_keeps_the_rows(
    blank_db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with psycopg.connect(blank_db_url) as conn:
        monkeypatch.setattr(migrate, "available", migrations_up_to(34))
        migrate.migrate(conn, embedding_dim=3, embedder="tiny")
        _fill_at_0034(conn)
        _upgrade_to_0035_keeps_the_rows(conn, monkeypatch)


@pytest.mark.slow  # needs the Citus cluster (skips without it)
def test_upgrade_0034_to_0035_on_a_distributed_database(monkeypatch: pytest.MonkeyPatch) -> None:
    """As above on a Citus cluster distributed at 0034, the counters and packs sharded with the tenant's rows:
    0035 drops their shards, and the new row trigger runs on the workers that hold the episodes."""
    from support import citus_cluster

    if (reason := citus_cluster.unreachable()) is not None:
        pytest.skip(reason)
    with citus_cluster.blank_database(f"episodes_citus_{os.getpid()}_0035") as url, psycopg.connect(url) as conn:
        monkeypatch.setattr(migrate, "available", migrations_up_to(34))
        migrate.migrate(conn, embedding_dim=3, embedder="tiny")
        # What the code of 0034 distributed: the recall copy's tables too.
        # (Tables that later migrations create are not there yet.)
        at_0034 = tuple(
            t
            for t in (*cluster.TENANT_TABLES, *RECALL_COPY_TABLES)
            if conn.execute("SELECT to_regclass(%s) IS NOT NULL", (t,)).fetchone() == (True,)
        )
        monkeypatch.setattr(cluster, "TENANT_TABLES", at_0034)
        cluster.distribute(conn, shard_count=4)
        _fill_at_0034(conn)
        shards = conn.execute(
            "SELECT count(*) FROM citus_shards WHERE table_name::text = ANY (%s)", (list(RECALL_COPY_TABLES),)
        ).fetchone()
        assert shards == (8,)
        _upgrade_to_0035_keeps_the_rows(conn, monkeypatch)
        assert conn.execute(
            "SELECT count(*) FROM citus_shards WHERE table_name::text = ANY (%s)", (list(RECALL_COPY_TABLES),)
        ).fetchone() == (0,)
        triggers = conn.execute(  # each shard's only trigger: the new one (named with the shard's id)
            "SELECT shardid, result FROM run_command_on_shards('episodes', "
            "$$SELECT string_agg(tgname, ',') FROM pg_trigger WHERE tgrelid = '%s'::regclass AND NOT tgisinternal$$)"
        ).fetchall()
        assert len(triggers) == 4 and all(result == f"episodes_count_update_{shard}" for shard, result in triggers)
