"""The analyst surface: views in the `analyst` schema, the analyst and operator roles, example queries.

Data: the bundled example transcripts, ingested and summarised once per test process into a
template database (cloned per test). Tenant acme is summarised by the offline extractor, tenant
globex by the real anthropic SDK against the local fake server, with one refusal (a dead letter)
and one 500 (a transcript waiting for a retry) scripted, so model calls, costs and failures are
real rows. The fake model resolves every open item the job offers it (``resolving_responder``), so
globex's lifecycle comes from the real pipeline; for acme (the offline extractor resolves nothing)
two questions and two commitments are resolved with the job's own ``resolve_item`` query.

The offline extractor gets a feature-hashing embedder instead of MiniLM so the suite stays fast:
its events come from cue-phrase rules; embeddings only rank summary sentences.

Marked ``citus``: every test that reads the examples runs on one PostgreSQL and again on the Citus
cluster, with the same rows copied there (``_copy_examples``): into a database of their own for a
module's read-only tests, into the process's emptied cluster database for each test that changes data."""

from __future__ import annotations

import re
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from support.analyst_examples import as_role, owner

from jobs.db import Database, set_local
from jobs.report import analyst_connection
from jobs.report.data import analyst_role
from jobs.resources import sql_dir

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
VIEWS = (
    "decisions",
    "decisions_by_branch",
    "preferences",
    "open_questions",
    "commitments",
    "episode_timeline",
    "entity_mentions",
    "model_cost_daily",
    "failures",
    "event_types",
)
TENANT_VIEWS = tuple(v for v in VIEWS if v != "event_types")
BASE_TABLES = ("episodes", "episode_events", "episode_entities", "transcripts", "model_calls", "job_runs")

pytestmark = pytest.mark.citus  # runs on one PostgreSQL and on the Citus cluster (conftest)


# Each fixture below runs its tests once per backend, as the `citus` marker does for `db` (conftest).
# BACKENDS (conftest): the Citus run is marked slow.


# -- roles and privileges ------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["episodes_analyst", "episodes_operator"])
@pytest.mark.parametrize("table", BASE_TABLES)
def test_analyst_roles_cannot_read_base_tables(ro_db: Database, role: str, table: str) -> None:
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match=f"permission denied for table {table}"):
        as_role(ro_db, role, f"SELECT 1 FROM public.{table} LIMIT 1", tenant="acme")


def test_analyst_roles_are_read_only_and_cannot_bypass(ro_db: Database) -> None:
    rows = owner(
        ro_db,
        "SELECT rolname, rolcanlogin, rolsuper, rolbypassrls, rolcreaterole FROM pg_roles "
        "WHERE rolname IN ('episodes_analyst', 'episodes_operator') ORDER BY rolname",
    )
    assert [r["rolname"] for r in rows] == ["episodes_analyst", "episodes_operator"]
    assert all(not (r["rolsuper"] or r["rolbypassrls"] or r["rolcreaterole"]) for r in rows)
    # NOLOGIN on one PostgreSQL; on a cluster Citus reaches the workers as the role itself (jobs.citus.cluster)
    distributed = owner(ro_db, "SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') AS d")[0]["d"]
    assert all(r["rolcanlogin"] == distributed for r in rows)
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState, match='cannot insert into view "event_types"'):
        as_role(ro_db, "episodes_operator", "INSERT INTO analyst.event_types VALUES ('hack', 'through the view')")
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="_event_resolution"):
        as_role(ro_db, "episodes_analyst", "SELECT 1 FROM analyst._event_resolution", tenant="acme")
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="schema analyst"):
        as_role(ro_db, "episodes_app", "SELECT 1 FROM analyst.decisions", tenant="acme")
    grants = owner(
        ro_db,
        "SELECT DISTINCT table_schema FROM information_schema.role_table_grants "
        "WHERE grantee IN ('episodes_analyst', 'episodes_operator')",
    )
    assert [g["table_schema"] for g in grants] == ["analyst"]


def test_every_view_and_column_is_documented(ro_db: Database) -> None:
    rows = owner(
        ro_db,
        """
        SELECT c.relname, a.attname, obj_description(c.oid, 'pg_class') AS view_doc,
               col_description(c.oid, a.attnum) AS column_doc, c.reloptions
        FROM pg_class c
        JOIN pg_namespace n ON n.oid = c.relnamespace
        JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
        WHERE n.nspname = 'analyst' AND c.relkind = 'v' AND c.relname NOT LIKE '\\_%'""",
    )
    assert {r["relname"] for r in rows} == set(VIEWS)
    assert [r["relname"] for r in rows if not r["view_doc"]] == []
    assert [f"{r['relname']}.{r['attname']}" for r in rows if not r["column_doc"]] == []
    barriers = {r["relname"] for r in rows if "security_barrier=true" in (r["reloptions"] or [])}
    assert barriers == set(TENANT_VIEWS)


# -- tenant scoping ------------------------------------------------------------------------------


@pytest.mark.parametrize("view", TENANT_VIEWS)
def test_scoped_analyst_sees_only_its_tenant_and_operator_sees_all(ro_db: Database, view: str) -> None:
    everyone = as_role(ro_db, "episodes_operator", f"SELECT tenant_id, count(*) AS n FROM analyst.{view} GROUP BY 1")
    by_tenant = {r["tenant_id"]: r["n"] for r in everyone}
    assert by_tenant and set(by_tenant) <= {"acme", "globex"}
    for tenant in ("acme", "globex"):
        seen = as_role(
            ro_db, "episodes_analyst", f"SELECT tenant_id, count(*) AS n FROM analyst.{view} GROUP BY 1", tenant=tenant
        )
        assert {r["tenant_id"]: r["n"] for r in seen} == ({tenant: by_tenant[tenant]} if tenant in by_tenant else {})
    assert as_role(ro_db, "episodes_analyst", f"SELECT count(*) AS n FROM analyst.{view}")[0]["n"] == 0
    # the operator sees everything even with a tenant set; a WHERE naming another tenant finds nothing as analyst
    assert len(as_role(ro_db, "episodes_operator", f"SELECT 1 FROM analyst.{view}", tenant="acme")) == sum(
        by_tenant.values()
    )
    assert (
        as_role(
            ro_db,
            "episodes_analyst",
            f"SELECT count(*) AS n FROM analyst.{view} WHERE tenant_id = 'globex'",
            tenant="acme",
        )[0]["n"]
        == 0
    )


def test_views_count_what_the_tables_hold(ro_db: Database) -> None:
    """Operator totals equal the base tables: current session episodes only, every model call."""
    table = owner(
        ro_db,
        """
        SELECT (SELECT count(*) FROM episodes WHERE status = 'current' AND kind = 'session') AS episodes,
               (SELECT count(*) FROM episode_events ev JOIN episodes e ON e.tenant_id = ev.tenant_id AND e.id = ev.episode_id
                 WHERE ev.type = 'decision' AND e.status = 'current' AND e.kind = 'session') AS decisions,
               (SELECT count(*) FROM episode_entities) AS mentions,
               (SELECT sum(cost_usd) FROM model_calls) AS cost,
               (SELECT count(*) FROM model_calls) AS calls""",
    )[0]
    view = as_role(
        ro_db,
        "episodes_operator",
        """
        SELECT (SELECT count(*) FROM analyst.episode_timeline WHERE kind = 'session') AS episodes,
               (SELECT count(*) FROM analyst.decisions) AS decisions,
               (SELECT count(*) FROM analyst.entity_mentions) AS mentions,
               (SELECT sum(cost_usd) FROM analyst.model_cost_daily) AS cost,
               (SELECT sum(calls) FROM analyst.model_cost_daily) AS calls""",
    )[0]
    assert view == table
    assert table["episodes"] == 34 and table["decisions"] > 0 and table["calls"] >= 15 and table["cost"] > 0


def test_security_barrier_keeps_a_leaky_function_from_seeing_other_tenants(edb: Database) -> None:
    seen: list[str] = []
    with edb.pool.connection() as conn:
        # Migration 0027 takes TEMPORARY from the analyst role, so it can create no such function; the
        # barrier must hold on its own (a database restored without --create has PostgreSQL's defaults
        # back), so the role is given the privilege for this test.
        grant = sql.SQL("{} TEMPORARY ON DATABASE {} {} episodes_analyst")
        database = sql.Identifier(conn.info.dbname)
        conn.execute(grant.format(sql.SQL("GRANT"), database, sql.SQL("TO")))
        # only the function's own notices (a cluster adds some of its own)
        conn.add_notice_handler(
            lambda d: (
                seen.append(d.message_primary or "")
                if d.severity_nonlocalized == "NOTICE" and (d.message_primary or "").startswith("saw ")
                else None
            )
        )
        with conn.transaction():
            set_local(conn, **{"episodes.tenant_id": "acme"})
            with analyst_role(conn, "episodes_analyst"):
                conn.execute(
                    "CREATE FUNCTION pg_temp.leak(t text, w text) RETURNS boolean LANGUAGE plpgsql "
                    "COST 0.0001 AS $$ BEGIN RAISE NOTICE 'saw % %', t, w; RETURN true; END $$"
                )
                rows = conn.execute("SELECT what FROM analyst.decisions WHERE pg_temp.leak(tenant_id, what)").fetchall()
        conn.execute(grant.format(sql.SQL("REVOKE"), database, sql.SQL("FROM")))
    assert rows and len(seen) == len(rows)
    assert all(message.startswith("saw acme ") for message in seen)


# -- example queries -----------------------------------------------------------------------------


def example_queries() -> list[str]:
    return sorted(p.name for p in (sql_dir() / "queries").iterdir() if p.name.endswith(".sql"))


def test_there_are_at_least_eight_example_queries_each_with_a_question() -> None:
    names = example_queries()
    assert len(names) >= 8
    for name in names:
        text = (sql_dir() / "queries" / name).read_text(encoding="utf-8")
        assert re.search(r"^-- Question: .+\?$", text, re.MULTILINE), f"{name} has no '-- Question: ...?' header"
        assert re.search(r"^-- Scope: (tenant|operator)$", text, re.MULTILINE), f"{name} has no '-- Scope:' line"


@pytest.mark.parametrize("name", example_queries())
def test_example_query_returns_rows_within_its_scope(ro_db: Database, name: str) -> None:
    text = (sql_dir() / "queries" / name).read_text(encoding="utf-8")
    found = re.search(r"^-- Scope: (\w+)$", text, re.MULTILINE)
    assert found, f"{name} names no scope (a line '-- Scope: ...')"
    scope = found.group(1)
    if scope == "operator":
        with analyst_connection(ro_db, None) as conn:
            rows = conn.execute(text).fetchall()
        assert rows, f"{name} returned nothing"
        if "tenant_id" in rows[0]:
            assert {r["tenant_id"] for r in rows} <= {"acme", "globex"}
        return
    total = 0
    for tenant in ("acme", "globex"):
        with analyst_connection(ro_db, tenant) as conn:
            rows = conn.execute(text).fetchall()
            users = {r["user_id"] for r in conn.execute("SELECT DISTINCT user_id FROM analyst.episode_timeline")}
        total += len(rows)
        assert all(r.get("tenant_id", tenant) == tenant for r in rows)
        assert all(r.get("user_id", next(iter(users), None)) in users for r in rows), f"{name} leaked a user"
    assert total > 0, f"{name} returned nothing for either tenant"


def test_example_pricing_query_finds_the_plan_decisions(ro_db: Database) -> None:
    text = (sql_dir() / "queries" / "decisions_about_pricing.sql").read_text(encoding="utf-8")
    with analyst_connection(ro_db, "acme") as conn:
        rows = conn.execute(text).fetchall()
    assert any("Team plan at $49/seat" in r["what"] for r in rows)
    assert not any("SDK rather than raw REST" in r["what"] for r in rows)  # u-tom's API decision is not pricing
    words = re.compile(r"pric|plan|seat|discount|billing|tier|\$[0-9]", re.IGNORECASE)
    assert all(words.search(r["what"]) or {"plan", "seats", "billing"} & set(r["topic_tags"]) for r in rows)


def test_analyst_connection_is_read_only(ro_db: Database) -> None:
    with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
        with analyst_connection(ro_db, None) as conn:
            conn.execute("CREATE TEMP TABLE t (x int)")


# -- episodes status over the same data ----------------------------------------------------------


def test_status_counts_what_the_tables_hold(ro_db: Database) -> None:
    """`episodes status` over the examples (on a cluster its statements run on every shard)."""
    from jobs.cli.status_view import render_status

    out = render_status(ro_db)
    states = {
        r["state"]: r["n"]
        for r in owner(
            ro_db, "SELECT status AS state, count(*) AS n FROM transcripts WHERE ended_at IS NOT NULL GROUP BY 1"
        )
    }
    assert f"· done {states['done']} · dead 1" in out and states["done"] == 34
    kinds = owner(ro_db, "SELECT kind, status, count(*) AS n FROM episodes GROUP BY 1, 2 ORDER BY 1, 2")
    assert "episodes     " + " · ".join(f"{k['kind']}/{k['status']} {k['n']}" for k in kinds) in out
    dead = owner(ro_db, "SELECT tenant_id, session_id FROM transcripts WHERE status = 'dead'")[0]
    assert f"dead letter  {dead['tenant_id']}/{dead['session_id']} after " in out
    assert re.search(r"^  \S+ \S+ summarize +ok ", out, re.MULTILINE), out
