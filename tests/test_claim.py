"""Claims tenant by tenant: the tenants with work in turn, and nothing missed by keeping their list."""

from __future__ import annotations

import pytest
from psycopg.types.json import Jsonb

from jobs.db import Database
from jobs.summarize.claim import Claimer

pytestmark = pytest.mark.citus  # runs on one PostgreSQL and on the Citus cluster (conftest)


def add(db: Database, tenant: str, session: str) -> None:
    with db.tenant(tenant) as conn:
        conn.execute(
            "INSERT INTO transcripts (tenant_id, user_id, session_id, started_at, ended_at, messages, content_hash) "
            "VALUES (%s, 'u1', %s, '2025-03-04 09:00Z', '2025-03-04 09:20Z', %s, %s)",
            (tenant, session, Jsonb([{"role": "user", "content": "Hello."}]), f"hash-{session}"),
        )


def test_a_claimer_takes_the_tenants_with_work_in_turn_until_none_is_left(db: Database) -> None:
    for session in ("a1", "a2", "a3"):
        add(db, "acme", session)
    for session in ("b1", "b2", "b3"):
        add(db, "beta", session)
    claimer = Claimer(db, owner="w1", lease_seconds=60)
    claimer.REFRESH_SECONDS = 3600  # one read of the list, however slow the machine
    claimed = [claimer.claim() for _ in range(6)]
    tenants = [t.tenant_id for t in claimed if t is not None]
    assert sorted(t.session_id for t in claimed if t is not None) == ["a1", "a2", "a3", "b1", "b2", "b3"]
    assert all(tenants[i] != tenants[i + 1] for i in range(5))  # alternating, not one tenant drained first
    assert claimer.claim() is None


def test_a_tenant_that_gets_work_after_the_list_was_read_is_claimed_before_none_is_returned(db: Database) -> None:
    add(db, "acme", "a1")
    claimer = Claimer(db, owner="w1", lease_seconds=60)
    first = claimer.claim()  # reads the list: only acme has work
    add(db, "beta", "b1")
    second = claimer.claim()  # acme has nothing left: the list is read again, and beta is in it
    assert first is not None and first.tenant_id == "acme"
    assert second is not None and (second.tenant_id, second.session_id) == ("beta", "b1")
    assert claimer.claim() is None
    with db.admin() as conn:
        rows = conn.execute("SELECT session_id, status, lease_owner FROM transcripts ORDER BY session_id").fetchall()
    assert [(r["session_id"], r["status"], r["lease_owner"]) for r in rows] == [
        ("a1", "running", "w1"),
        ("b1", "running", "w1"),
    ]
