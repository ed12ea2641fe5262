"""Migrations: numbered, contiguous, each applied with its record in one transaction, idempotent."""

from __future__ import annotations

import re

import psycopg
import pytest

from jobs import migrate
from jobs.errors import EmbeddingDimensionMismatch, SchemaTooNew
from jobs.resources import sql_dir


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
        tables = {r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
        assert {"transcripts", "episodes", "episode_events", "episode_entities", "episode_lineage",
                "job_runs", "model_calls", "event_types"} <= tables
        dim = conn.execute(
            "SELECT atttypmod FROM pg_attribute WHERE attrelid = 'episodes'::regclass AND attname = 'embedding'"
        ).fetchone()[0]
        assert dim == 384
        before = conn.execute("SELECT count(*) FROM schema_migrations").fetchone()[0]
        assert migrate.migrate(conn, embedding_dim=384, embedder="test") == []
        assert conn.execute("SELECT count(*) FROM schema_migrations").fetchone()[0] == before


def test_embedding_dimension_is_chosen_at_init(blank_db_url: str) -> None:
    with psycopg.connect(blank_db_url) as conn:
        migrate.migrate(conn, embedding_dim=16, embedder="tiny")
        typmod = conn.execute(
            "SELECT atttypmod FROM pg_attribute WHERE attrelid = 'episodes'::regclass AND attname = 'embedding'"
        ).fetchone()[0]
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
        assert conn.execute("SELECT to_regclass('half_done')").fetchone()[0] is None
