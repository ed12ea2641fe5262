"""Tenant isolation is enforced by the database (row-level security), not by remembering a WHERE."""

from __future__ import annotations

import psycopg
import pytest
from psycopg.types.json import Jsonb

from jobs.db import APP_ROLE, Database, one

pytestmark = pytest.mark.citus  # runs on one PostgreSQL and on the Citus cluster (conftest)

MESSAGES = Jsonb([{"role": "user", "content": "hello"}])


def _insert(db: Database, tenant: str, session: str) -> None:
    with db.tenant(tenant) as conn:
        conn.execute(
            "INSERT INTO transcripts (tenant_id, user_id, session_id, messages, content_hash) "
            "VALUES (%s, 'u1', %s, %s, 'h')",
            (tenant, session, MESSAGES),
        )


def test_tenant_reads_nothing_of_another_even_with_where(db: Database) -> None:
    _insert(db, "alpha", "a-1")
    _insert(db, "beta", "b-1")
    with db.tenant("alpha") as conn:
        rows = conn.execute("SELECT tenant_id, session_id FROM transcripts").fetchall()
        assert [(r["tenant_id"], r["session_id"]) for r in rows] == [("alpha", "a-1")]
        assert one(conn.execute("SELECT count(*) AS n FROM transcripts WHERE tenant_id = 'beta'"))["n"] == 0
        updated = conn.execute("UPDATE transcripts SET purpose = 'hacked' WHERE tenant_id = 'beta'").rowcount
        deleted = conn.execute("DELETE FROM transcripts WHERE tenant_id = 'beta'").rowcount
        assert (updated, deleted) == (0, 0)
    with db.admin() as conn:
        row = one(conn.execute("SELECT purpose FROM transcripts WHERE tenant_id = 'beta'"))
        assert row["purpose"] == "general"


def test_tenant_cannot_write_rows_for_another(db: Database) -> None:
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
        _insert_as(db, scope="alpha", tenant="beta")


def _insert_as(db: Database, scope: str, tenant: str) -> None:
    with db.tenant(scope) as conn:
        conn.execute(
            "INSERT INTO transcripts (tenant_id, user_id, session_id, messages, content_hash) "
            "VALUES (%s, 'u1', 's', %s, 'h')",
            (tenant, MESSAGES),
        )


def test_unscoped_app_role_sees_nothing(db: Database) -> None:
    _insert(db, "alpha", "a-1")
    with db.pool.connection() as conn:
        with conn.transaction():
            conn.execute(f"SET LOCAL ROLE {APP_ROLE}")
            assert one(conn.execute("SELECT count(*) AS n FROM transcripts"))["n"] == 0


def test_every_tenant_table_has_rls_and_a_policy(db: Database) -> None:
    """Catalog-driven: any table with a tenant_id column must have RLS enabled and a policy."""
    with db.admin() as conn:
        tables = conn.execute(
            """SELECT c.relname, c.relrowsecurity,
                      (SELECT count(*) FROM pg_policy p WHERE p.polrelid = c.oid) AS policies
               FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
               WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema')
                 AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid
                             AND a.attname = 'tenant_id' AND NOT a.attisdropped)"""
        ).fetchall()
    assert len(tables) >= 6
    missing = [t["relname"] for t in tables if not t["relrowsecurity"] or t["policies"] == 0]
    assert missing == [], f"tenant tables without row-level security: {missing}"


def test_app_role_cannot_bypass_rls(db: Database) -> None:
    with db.admin() as conn:
        role = conn.execute("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = %s", (APP_ROLE,)).fetchone()
        owners = one(
            conn.execute(
                "SELECT count(*) AS n FROM pg_tables WHERE schemaname = 'public' AND tableowner = %s", (APP_ROLE,)
            )
        )
    assert role == {"rolsuper": False, "rolbypassrls": False}
    assert owners["n"] == 0, "the app role must not own tables (owners bypass RLS)"
