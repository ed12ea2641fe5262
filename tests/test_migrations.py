"""Migrations: numbered, contiguous, each applied with its record in one transaction, idempotent."""

from __future__ import annotations

import datetime as dt
import re

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector
from psycopg.rows import dict_row

from jobs import migrate
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
    """0016 rewrites ids, keys and freshness on a database with data: every row stays, the references
    still hold (now as keys with tenant_id), new ids follow the old ones, and recall counters exist."""
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
        assert conn.execute("SELECT tenant_id, user_id, version FROM recall_versions").fetchall() == [("acme", "u1", 1)]
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
                    "'m', 'p') RETURNING id, changed_version"
                )
            )
        assert fresh[0] > year and fresh[1] == 2  # ids continue; the write bumped the user's counter
        with pytest.raises(psycopg.errors.ForeignKeyViolation):  # no reference is silently left dangling
            with conn.transaction():
                conn.execute("DELETE FROM episodes WHERE id = %s", (year,))
        with conn.transaction():  # the way every deleting path goes: release, then delete
            conn.execute("SELECT episodes_release_references('acme', %s)", ([year],))
            conn.execute("DELETE FROM episodes WHERE id = %s", (year,))
        assert one(conn.execute("SELECT compressed_into FROM episodes WHERE id = %s", (new,)))[0] is None
        assert conn.execute("SELECT version, deleted_version FROM recall_versions").fetchone() == (3, 3)
