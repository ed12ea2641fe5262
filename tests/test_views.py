"""The analyst views are defined once, in sql/views/NN_name.sql, and every migrate that leaves the schema
current drops them and creates them again from those files (jobs.migrate.apply_views): a migrated
database holds exactly the views of the files (definitions as PostgreSQL normalises them, options,
comments, grants), whatever a numbered migration or a hand left there."""

from __future__ import annotations

import re
from typing import Any

import psycopg
import pytest

from jobs import migrate
from jobs.errors import EpisodesError
from jobs.resources import sql_dir

# Everything of the schema analyst that the files make or that the views read through, as the catalog
# holds it: views (definition, options, comment, column comments, grants), functions, row types.
CATALOG = """
SELECT 'relation ' || c.oid::regclass::text || ' (' || c.relkind::text || ')',
       jsonb_build_object(
           'definition', CASE WHEN c.relkind = 'v' THEN pg_get_viewdef(c.oid) END,
           'options', c.reloptions,
           'grants', c.relacl::text[],
           'comment', obj_description(c.oid, 'pg_class'),
           'columns', (SELECT jsonb_agg(jsonb_build_array(a.attname, format_type(a.atttypid, a.atttypmod),
                                                          col_description(c.oid, a.attnum))
                                        ORDER BY a.attnum)
                       FROM pg_attribute a
                       WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped))
FROM pg_class c
WHERE c.relnamespace = 'analyst'::regnamespace
UNION ALL
SELECT 'function ' || p.oid::regprocedure::text,
       jsonb_build_object('definition', pg_get_functiondef(p.oid), 'grants', p.proacl::text[],
                          'comment', obj_description(p.oid, 'pg_proc'))
FROM pg_proc p
WHERE p.pronamespace = 'analyst'::regnamespace
"""
LAST_MIGRATION_WITH_VIEWS = 33  # 0004, 0008, 0009, 0012 and 0017 defined the views; since then sql/views does


def catalog(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    return {str(name): value for name, value in conn.execute(CATALOG).fetchall()}


def views(state: dict[str, Any]) -> dict[str, str]:
    """view name -> its definition as PostgreSQL normalised it."""
    return {
        name.split()[1]: value["definition"]
        for name, value in state.items()
        if name.startswith("relation ") and name.endswith("(v)")
    }


def test_the_database_holds_exactly_the_views_of_the_files(
    db_url: str, blank_db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database migrated as `episodes init` does, against one whose analyst views were built from the files
    alone: the numbered migrations run without the views step, everything they left in analyst dropped
    (00_drop.sql), then the other files run by hand. The same views, definitions, security barriers,
    comments, grants and owner-rights readers; no view in the migrated database that the files do not make."""
    with psycopg.connect(db_url) as conn:
        migrated = catalog(conn)
    with monkeypatch.context() as patch:
        patch.setattr(migrate, "apply_views", lambda conn: None)
        with psycopg.connect(blank_db_url) as conn:
            migrate.migrate(conn, embedding_dim=384, embedder="all-MiniLM-L6-v2")
    with psycopg.connect(blank_db_url) as conn:
        from_migrations = views(catalog(conn))
        first, *rest = migrate.view_files()
        assert first.name == "00_drop.sql"
        conn.execute(first.sql)
        assert views(catalog(conn)) == {}
        for view in rest:
            conn.execute(view.sql)
        from_files = catalog(conn)
    assert set(views(migrated)) == set(views(from_files))
    assert migrated == from_files
    # The files took over every view the migrations made; views added since (decisions_by_branch) exist in files only.
    assert set(from_migrations) <= set(views(from_files)) and "analyst.decisions_by_branch" not in from_migrations
    assert views(migrated)["analyst.decisions"].strip().startswith("SELECT r.tenant_id")
    assert migrated["relation analyst.decisions (v)"]["options"] == ["security_barrier=true"]
    assert "episodes_analyst=r/" in " ".join(migrated["relation analyst.decisions (v)"]["grants"])


def test_every_migrate_brings_back_the_views_of_the_files(db_url: str) -> None:
    """Whatever was done to the views since (a stray view, a changed body, a lost security barrier, grant or
    comment), the next migrate, with no migration pending, leaves exactly the files' views again."""
    with psycopg.connect(db_url, autocommit=True) as conn:
        before = catalog(conn)
        conn.execute("CREATE VIEW analyst.stray AS SELECT 1 AS one")
        conn.execute("CREATE OR REPLACE VIEW analyst._decisions AS SELECT * FROM analyst._decisions WHERE false")
        conn.execute("ALTER VIEW analyst.open_questions RESET (security_barrier)")
        conn.execute("REVOKE SELECT ON analyst.commitments FROM episodes_analyst")
        conn.execute("COMMENT ON COLUMN analyst.failures.error IS 'changed by hand'")
        conn.execute("COMMENT ON VIEW analyst.event_types IS NULL")
        assert catalog(conn) != before
        assert migrate.migrate(conn, embedding_dim=384, embedder="all-MiniLM-L6-v2") == []
        assert catalog(conn) == before


def test_a_view_over_an_analyst_view_stops_the_re_create_and_says_which(db_url: str) -> None:
    """The drop is not CASCADE: someone's own view over an analyst view is never dropped silently. The error
    names it and says what to do; the analyst views stay as they were."""
    with psycopg.connect(db_url, autocommit=True) as conn:
        before = catalog(conn)
        conn.execute(
            "CREATE VIEW public.pricing_decisions AS SELECT * FROM analyst.decisions WHERE 'pricing' = ANY(topic_tags)"
        )
        with pytest.raises(EpisodesError, match=r"view pricing_decisions depends on view analyst\.decisions\. Drop"):
            migrate.migrate(conn, embedding_dim=384, embedder="all-MiniLM-L6-v2")
        assert catalog(conn) == before
        assert migrate.current_version(conn) == migrate.code_version()


def test_no_migration_after_the_views_files_defines_an_analyst_view() -> None:
    """A view changes in its file; a numbered migration that made or altered one would be undone by the next
    re-create. (Dropping one, before changing a column it reads, is fine: the files make it again.)"""
    touches = re.compile(r"\b(CREATE|ALTER|COMMENT\s+ON)\s+(OR\s+REPLACE\s+)?(VIEW|COLUMN)\s+analyst\.", re.I)
    offending = [m.name for m in migrate.available() if m.version > LAST_MIGRATION_WITH_VIEWS and touches.search(m.sql)]
    assert offending == [], "change the view in sql/views/ instead (docs/development.md, 'Analyst views')"


def test_view_files_are_numbered_in_the_order_they_run() -> None:
    names = sorted(p.name for p in (sql_dir() / "views").iterdir() if p.name.endswith(".sql"))
    assert names == [f.name for f in migrate.view_files()], "every file is NN_name.sql (two digits)"
    assert names[0] == "00_drop.sql" and names[-1] == "90_scoped.sql"


@pytest.mark.citus
def test_the_views_are_re_created_and_answer_on_every_backend(db_url: str) -> None:
    """On a Citus cluster the files run again over distributed tables (the views, row types and readers
    propagate to the workers), and the views answer as before: a scoped analyst sees its tenant's rows."""
    with psycopg.connect(db_url, autocommit=True) as conn:
        assert migrate.migrate(conn, embedding_dim=384, embedder="all-MiniLM-L6-v2") == []
        types = conn.execute("SELECT count(*) FROM event_types").fetchone()
        conn.execute(
            "INSERT INTO transcripts (tenant_id, user_id, session_id, messages, content_hash, ended_at, status, "
            "last_error) VALUES (%s, 'u1', %s, '[{\"role\": \"user\", \"content\": \"hi\"}]', 'h', now(), 'dead', "
            "'boom')",
            ("acme", "s1"),
        )
        conn.execute(
            "INSERT INTO transcripts (tenant_id, user_id, session_id, messages, content_hash, ended_at, status, "
            "last_error) VALUES (%s, 'u1', %s, '[{\"role\": \"user\", \"content\": \"hi\"}]', 'h', now(), 'dead', "
            "'boom')",
            ("globex", "s2"),
        )
        conn.execute("SET ROLE episodes_analyst")
        conn.execute("SELECT set_config('episodes.tenant_id', 'acme', false)")
        assert conn.execute("SELECT tenant_id, session_id, source FROM analyst.failures").fetchall() == [
            ("acme", "s1", "dead_letter")
        ]
        assert conn.execute("SELECT count(*) FROM analyst.event_types").fetchone() == types
        conn.execute("RESET ROLE")
