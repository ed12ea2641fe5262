"""Owner-rights functions trust nothing from the session (issue 35, item 1; migration 0027).

A SECURITY DEFINER function runs as the owner of the tables, on the embedded server a superuser. If its
``search_path`` lets the session's temporary schema come before ``public`` (``SET search_path = public``
does: PostgreSQL searches ``pg_temp`` first unless it is named), the caller's temporary table of the same
name is what the function writes to, and a trigger on it runs as the owner. Here: every such function, found
through pg_proc so that a later one is covered too, names ``pg_temp`` last; the escalation itself is tried
as the service would (login role, ``SET LOCAL ROLE episodes_app``) against each function open to that role
(a table of the same name as one it reads, made a view whose rows run the attacker's code); and on a database made by ``episodes init`` the tenant-facing roles may create no temporary object at
all. Also the memory-link secret: made inside the database, never chosen by whoever asks first.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from jobs import config, migrate
from jobs.db import SERVICE_ROLE, Database, one
from jobs.service.page_link import link_secret

TENANT_FACING = ("episodes_service", "episodes_app", "episodes_analyst", "episodes_operator")

# What an attacker runs as the owner once it gets there: make the login role a superuser and take the
# secrets, leaving word in a setting of its session (set_config(..., false) outlives the function).
PAYLOAD = """
CREATE FUNCTION pg_temp.grab() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('attack.ran_as', current_user, false);
    PERFORM set_config('attack.secrets', coalesce((SELECT string_agg(value, ',') FROM public.episodes_secrets), ''),
                       false);
    BEGIN
        EXECUTE 'ALTER ROLE episodes_service SUPERUSER';
    EXCEPTION WHEN insufficient_privilege THEN
        NULL;  -- an owner that is no superuser: the secrets are enough
    END;
    RETURN true;
END
$$;
"""

# Each way in for the tenant role: the look-alike the attacker makes in its temporary schema, and the call that
# would reach it if the function searched pg_temp first. (Migration 0027 was made for three functions the recall
# counters of 0016-0021 needed, whose tables a temporary table could shadow; 0035 dropped them with the counters.)
ATTACKS = {
    # The erasure hash: it reads the salt from episodes_secrets, so a view of that name whose rows pass
    # through the payload.
    "episodes_user_hash": (
        "CREATE TEMP VIEW episodes_secrets AS SELECT 'erasure_salt'::text AS key, 'chosen'::text AS value "
        "WHERE pg_temp.grab()",
        "SELECT episodes_user_hash('acme', 'u-1')",
    ),
    # Storing a transcript (trigger transcripts_stay_erased): it reads erased_sessions and erasure_keys.
    "transcripts_stay_erased": (
        "CREATE TEMP VIEW erased_sessions AS SELECT 'acme'::text AS tenant_id, ''::text AS session_hash, "
        "now() AS erased_at WHERE pg_temp.grab(); "
        "CREATE TEMP VIEW erasure_keys AS SELECT 'acme'::text AS tenant_id, 'k'::text AS key WHERE pg_temp.grab()",
        "INSERT INTO transcripts (tenant_id, user_id, session_id, messages) "
        "VALUES ('acme', 'u-1', 's-1', '[{\"role\": \"user\", \"content\": \"hi\"}]')",
    ),
}


def _service_url(db_url: str) -> str:
    info = psycopg.conninfo.conninfo_to_dict(db_url)
    info["user"] = SERVICE_ROLE
    info.pop("password", None)
    return psycopg.conninfo.make_conninfo("", **info)


def _definer_functions(conn: psycopg.Connection[Any]) -> list[tuple[str, list[str] | None]]:
    """(signature, proconfig) of every SECURITY DEFINER function that is not an extension's."""
    return conn.execute("""
        SELECT p.oid::regprocedure::text, p.proconfig
        FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE p.prosecdef AND n.nspname NOT IN ('pg_catalog', 'information_schema')
          AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid
                          AND d.deptype = 'e')
        ORDER BY 1
    """).fetchall()


def _search_path(config_entries: list[str] | None) -> list[str] | None:
    """The function's own search_path as a list of schema names, or None when it sets none."""
    for entry in config_entries or []:
        name, _, value = entry.partition("=")
        if name == "search_path":
            return [part.strip().strip('"') for part in value.split(",")]
    return None


@pytest.mark.citus  # also on the Citus cluster when one is up
def test_every_definer_function_names_pg_temp_last(db: Database) -> None:
    """Found through pg_proc, so a function added later is held to it too: its own search_path starts with
    pg_catalog (no operator or function of another schema shadows a built-in) and ends with pg_temp (the
    session's temporary objects come after every real one, and functions are never looked up there)."""
    with psycopg.connect(db.url) as conn:
        functions = _definer_functions(conn)
    assert len(functions) >= 10  # 0017's analyst readers, 0023's, 0026's and 0029's functions
    wrong = {
        name: path
        for name, config_entries in functions
        if (path := _search_path(config_entries)) is None or path[0] != "pg_catalog" or path[-1] != "pg_temp"
    }
    assert wrong == {}


@pytest.fixture
def temp_allowed(db: Database) -> Iterator[str]:
    """The test database with TEMPORARY granted to episodes_app: as on a database the revoke of 0027 did not
    reach (cloned from a template, restored from a dump). The search path alone must hold there."""
    dbname = psycopg.conninfo.conninfo_to_dict(db.url)["dbname"]
    with psycopg.connect(db.url, autocommit=True) as conn:
        conn.execute(f'GRANT TEMPORARY ON DATABASE "{dbname}" TO episodes_app')
    yield _service_url(db.url)
    with psycopg.connect(db.url, autocommit=True) as conn:  # the Citus database serves the process's other tests
        conn.execute(f'REVOKE TEMPORARY ON DATABASE "{dbname}" FROM episodes_app')


@pytest.mark.citus  # also on the Citus cluster when one is up
@pytest.mark.parametrize("function", sorted(ATTACKS))
def test_a_temporary_look_alike_does_not_run_as_the_owner(temp_allowed: str, function: str) -> None:
    """The escalation of the issue, through each function that was open to it: as the login role, in the
    tenant's transaction as episodes_app, a temporary table (or view) named like the function's table, with
    a trigger (or a row filter) that would make episodes_service a superuser and read episodes_secrets. The
    function must use its own table: the payload never runs, the role stays what it was, the call works."""
    look_alike, call = ATTACKS[function]
    with psycopg.connect(temp_allowed) as conn:
        conn.execute("SET LOCAL ROLE episodes_app")
        conn.execute("SET LOCAL episodes.tenant_id = 'acme'")
        conn.execute(PAYLOAD)
        conn.execute(look_alike)
        with conn.transaction():
            conn.execute(call)
        ran_as = conn.execute(
            "SELECT current_setting('attack.ran_as', true), current_setting('attack.secrets', true)"
        ).fetchone()
        superuser = conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = %s", (SERVICE_ROLE,)).fetchone()
        conn.rollback()  # whatever happened stays in this transaction
    assert superuser == (False,), f"{function} made {SERVICE_ROLE} a superuser"
    assert ran_as in {(None, None), ("", "")}, f"{function} ran the caller's code as {ran_as[0] if ran_as else '?'}"


def test_the_tenant_facing_roles_may_create_no_temporary_object(
    blank_db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """On a database made as `episodes init` makes it: TEMPORARY is the owner's alone, so the login role can
    make no look-alike in the first place (neither as itself nor as episodes_app), and the functions still work."""
    with psycopg.connect(blank_db_url) as conn, caplog.at_level(logging.WARNING, logger="jobs.migrate"):
        migrate.migrate(conn, embedding_dim=3, embedder="tiny")
        assert [r.getMessage() for r in caplog.records] == []  # the owner could revoke: nothing to tell
        migrate.allow_service_login(conn)
        allowed = {
            role: one(conn.execute("SELECT has_database_privilege(%s, current_database(), 'TEMPORARY')", (role,)))[0]
            for role in TENANT_FACING
        }
        public = conn.execute(
            "SELECT count(*) FROM pg_database d, aclexplode(d.datacl) a WHERE d.datname = "
            "current_database() AND a.grantee = 0 AND a.privilege_type = 'TEMPORARY'"
        ).fetchone()
        conn.execute("CREATE TEMP TABLE owner_scratch (x int)")  # the owner keeps it (bench/recall.py --cluster)
    assert allowed == dict.fromkeys(TENANT_FACING, False)
    assert public == (0,)
    with psycopg.connect(_service_url(blank_db_url)) as conn:
        for role in (None, "episodes_app"):
            with conn.transaction():
                if role:
                    conn.execute(f"SET LOCAL ROLE {role}")
                with pytest.raises(psycopg.errors.InsufficientPrivilege, match="temporary"):
                    conn.execute("CREATE TEMP TABLE episodes_secrets (key text, value text)")
        conn.execute("SET LOCAL ROLE episodes_app")
        conn.execute("SET LOCAL episodes.tenant_id = 'acme'")
        hashed = one(conn.execute("SELECT episodes_user_hash('acme', 'u-1')"))[0]
        assert re.fullmatch(r"[0-9a-f]{64}", hashed)
        assert conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone() == (False,)


@pytest.fixture
def service_db(db: Database, monkeypatch: pytest.MonkeyPatch) -> Iterator[Database]:
    """The database as `episodes api` logs in to it (EPISODES_SERVICE_DATABASE_URL: episodes_service)."""
    monkeypatch.setenv("EPISODES_SERVICE_DATABASE_URL", _service_url(db.url))
    service = Database.for_service(config.load(), "episodes api")
    yield service
    service.close()


@pytest.mark.citus  # also on the Citus cluster when one is up
def test_the_caller_cannot_choose_the_link_secret(db: Database, service_db: Database) -> None:
    """Whoever asks first (the login role, or anyone who took it over) used to hand in the secret that signs
    every memory link; now the function takes nothing and the database draws the secret itself."""
    chosen = "0" * 64
    with service_db.login() as conn:
        try:
            with conn.transaction():
                conn.execute("SELECT episodes_link_secret(%s)", (chosen,))
        except psycopg.errors.UndefinedFunction:
            pass  # no function takes a candidate any more
        arguments = conn.execute(
            "SELECT array_agg(p.pronargs) AS n FROM pg_proc p WHERE p.proname = 'episodes_link_secret'"
        ).fetchone()
    assert arguments == {"n": [0]}
    secret = link_secret(service_db)
    assert secret != chosen.encode() and re.fullmatch(rb"[0-9a-f]{64}", secret)
    assert link_secret(db) == secret == link_secret(service_db)  # made once, the same for every process


def test_the_upgrade_replaces_a_link_secret_a_caller_may_have_chosen(
    blank_db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database whose secret was written before 0027 got it from its first caller: the upgrade drops it, so
    the next ask draws a new one (links handed out before, 15 minutes at most, stop working)."""
    everything = migrate.available()
    with psycopg.connect(blank_db_url) as conn:
        monkeypatch.setattr(migrate, "available", lambda: [m for m in everything if m.version < 27])
        migrate.migrate(conn, embedding_dim=3, embedder="tiny")
        migrate.allow_service_login(conn)
        conn.execute("INSERT INTO episodes_secrets (key, value) VALUES ('memory_link_secret', %s)", ("0" * 64,))
        conn.commit()
        monkeypatch.setattr(migrate, "available", lambda: everything)
        migrate.migrate(conn, embedding_dim=3, embedder="tiny")
    monkeypatch.setenv("DATABASE_URL", blank_db_url)
    monkeypatch.setenv("EPISODES_SERVICE_DATABASE_URL", _service_url(blank_db_url))
    service = Database.for_service(config.load(), "episodes api")
    try:
        secret = link_secret(service)
    finally:
        service.close()
    assert secret != b"0" * 64 and re.fullmatch(rb"[0-9a-f]{64}", secret)


def test_a_migrations_warning_is_logged_with_what_to_do(
    blank_db_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """0027 warns, with the statement to run, when the migrating role may not revoke TEMPORARY; psycopg drops
    server notices nobody handles, so `episodes init` logs our migrations' warnings (not a NOTICE, not the
    warnings of an extension such as Citus, which warns of every view over a table not distributed yet)."""
    shipped = migrate.available()
    warns = migrate.Migration(
        shipped[-1].version + 1,
        "warns",
        "DO $$ BEGIN RAISE NOTICE 'episodes: chatter'; "
        "RAISE WARNING 'an extension''s own warning'; "
        "RAISE WARNING 'episodes: the roles keep TEMPORARY' USING HINT = 'Run: REVOKE ...'; "
        "END $$;",
    )
    monkeypatch.setattr(migrate, "available", lambda: [*shipped, warns])
    with psycopg.connect(blank_db_url) as conn, caplog.at_level(logging.INFO, logger="jobs.migrate"):
        migrate.migrate(conn, embedding_dim=3, embedder="tiny")
    said = [(r.levelname, r.getMessage()) for r in caplog.records if getattr(r, "action", "") == "migrate_warning"]
    assert said == [("WARNING", "episodes: the roles keep TEMPORARY. Run: REVOKE ...")]
