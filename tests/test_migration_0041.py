"""Migration 0041: the lines the compress job copied under a super-summary go; the sessions keep their own.

Recall now searches a compressed session's own lines and quotes them under its super (sql/recall.sql
recall_scores, jobs/recall/scoring.py under_supers), so the copies are read by nothing (tests/test_compress_lines.py
has the recall side). On one PostgreSQL and on a Citus cluster distributed before the migration (one statement over
the two colocated tables).
"""

from __future__ import annotations

import os
from typing import Any

import psycopg
import pytest
from support.databases import migrations_up_to

from jobs import migrate
from jobs.citus import cluster
from jobs.db import one


def _episode(conn: psycopg.Connection[Any], tenant: str, kind: str, session: str | None, lines: list[str]) -> int:
    episode = int(
        one(
            conn.execute(
                "INSERT INTO episodes (tenant_id, user_id, kind, session_id, summary, importance, started_at, ended_at, "
                "period_start, period_end, model, prompt_version) VALUES (%s, 'u1', %s, %s, 'Maria asked about SSO', "
                "0.5, '2024-03-01', '2024-03-01', %s, %s, 'm', 'p') RETURNING id",
                (tenant, kind, session, *(("2024-01-01", "2024-12-31") if kind == "super" else (None, None))),
            )
        )[0]
    )
    for ordinal, text in enumerate(lines):
        conn.execute(
            "INSERT INTO episode_lines (tenant_id, user_id, episode_id, ordinal, message_index, speaker, text, "
            "embedding) VALUES (%s, 'u1', %s, %s, %s, 'user', %s, '[1,0,0]')",
            (tenant, episode, ordinal, ordinal, text),
        )
    return episode


def _fill_at_0040(conn: psycopg.Connection[Any]) -> dict[str, list[int]]:
    """In two tenants, a session with its two lines and a super-summary holding a copy of them, as 0040's compress
    job wrote it."""
    made: dict[str, list[int]] = {}
    with conn.transaction():
        for tenant in ("acme", "globex"):
            lines = ["SSO is in the renewal.", "Okta it is."]
            session = _episode(conn, tenant, "session", "s1", lines)
            copy = _episode(conn, tenant, "super", None, lines)
            made[tenant] = [session, copy]
    return made


def _migrated_keeps_only_the_sessions_lines(conn: psycopg.Connection[Any], made: dict[str, list[int]]) -> None:
    lines = "SELECT tenant_id, episode_id, count(*) FROM episode_lines GROUP BY 1, 2 ORDER BY 1, 2"
    assert conn.execute(lines).fetchall() == sorted((t, e, 2) for t, (s, c) in made.items() for e in (s, c))
    assert [m.version for m in migrate.migrate(conn, embedding_dim=3, embedder="tiny")] == [
        m.version for m in migrate._shipped() if m.version >= 41
    ]
    assert conn.execute(lines).fetchall() == sorted((t, s, 2) for t, (s, _) in made.items())
    assert conn.execute("SELECT count(*) FROM episodes WHERE kind = 'super'").fetchone() == (2,)  # the supers stay


def test_upgrade_to_0041_drops_the_supers_copied_lines(blank_db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with psycopg.connect(blank_db_url) as conn:
        monkeypatch.setattr(migrate, "available", migrations_up_to(40))
        migrate.migrate(conn, embedding_dim=3, embedder="tiny")
        made = _fill_at_0040(conn)
        monkeypatch.undo()
        _migrated_keeps_only_the_sessions_lines(conn, made)


@pytest.mark.slow  # needs the Citus cluster (skips without it)
def test_upgrade_to_0041_on_a_distributed_database(monkeypatch: pytest.MonkeyPatch) -> None:
    from support import citus_cluster

    if (reason := citus_cluster.unreachable()) is not None:
        pytest.skip(reason)
    with citus_cluster.blank_database(f"episodes_citus_{os.getpid()}_0041") as url, psycopg.connect(url) as conn:
        monkeypatch.setattr(migrate, "available", migrations_up_to(40))
        migrate.migrate(conn, embedding_dim=3, embedder="tiny")
        cluster.distribute(conn, shard_count=4)
        made = _fill_at_0040(conn)
        monkeypatch.undo()
        _migrated_keeps_only_the_sessions_lines(conn, made)
