"""Least privilege in the database (issue 29; README "Database roles"): what the API and MCP server log
in as, what a tenant transaction can reach after RESET ROLE, the secrets, the owner-rights functions,
row-level security, application_name, the pool check past descriptor 1024, and `keys create`."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from typing import Any

import httpx
import psycopg
import pytest
from click.testing import CliRunner
from psycopg.types.json import Jsonb
from support.api_server import api_process
from support.databases import service_url
from support.waiting import wait_until

from jobs import config
from jobs.cli import cli
from jobs.db import SERVICE_ROLE, Database, set_local
from jobs.rights.forget import forget_user
from jobs.service.keys import KeyVerifier, create_key, key_hash, key_is_live, revoke_key
from jobs.service.page_link import link_secret

SECRET_KEYS = ("memory_link_secret", "erasure_salt")


def _seed(db: Database) -> None:
    """Two tenants with an episode each (written as each tenant, the triggers included)."""
    for tenant in ("acme", "globex"):
        with db.tenant(tenant) as conn:
            conn.execute(
                "INSERT INTO episodes (tenant_id, user_id, session_id, kind, summary, importance, started_at, ended_at, "
                "model, prompt_version) VALUES (%s, 'u-1', 's-1', 'session', 'the pricing call', 0.5, now(), now(), "
                "'m', 'p')",
                (tenant,),
            )


def _denied(conn: psycopg.Connection[Any], statement: str, *args: object) -> bool:
    """Whether ``statement`` is refused for lack of privilege (the transaction goes on after it)."""
    try:
        with conn.transaction():
            conn.execute(statement, args or None)
    except psycopg.errors.InsufficientPrivilege:
        return True
    return False


def test_the_service_logs_in_as_a_role_that_owns_nothing_and_is_no_superuser(service_db: Database) -> None:
    with service_db.login() as conn:
        row = conn.execute(
            "SELECT current_user AS who, rolsuper, rolbypassrls, rolcreaterole, rolcreatedb "
            "FROM pg_roles WHERE rolname = current_user"
        ).fetchone()
        owned = conn.execute(
            "SELECT count(*) AS n FROM pg_class c JOIN pg_roles r ON r.oid = c.relowner WHERE r.rolname = current_user"
        ).fetchone()
    assert row is not None and owned is not None
    assert row["who"] == SERVICE_ROLE
    assert not (row["rolsuper"] or row["rolbypassrls"] or row["rolcreaterole"] or row["rolcreatedb"])
    assert owned["n"] == 0


@pytest.mark.citus  # also on the Citus cluster when one is up
def test_reset_role_in_a_tenant_transaction_gives_no_other_tenant_and_no_owner(
    db: Database, service_db: Database
) -> None:
    _seed(db)
    with service_db.tenant("acme") as conn:
        assert conn.execute("SELECT count(*) AS n FROM episodes").fetchone() == {"n": 1}
        conn.execute("RESET ROLE")
        who = conn.execute(
            "SELECT current_user AS who, (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS su"
        ).fetchone()
        assert who == {"who": SERVICE_ROLE, "su": False}
        for table in ("episodes", "transcripts", "episode_events", "api_keys", "episodes_settings"):
            assert _denied(conn, f"SELECT count(*) FROM {table}"), table
        # Neither may it hand itself the owner's role back.
        owner = conn.execute(
            "SELECT r.rolname FROM pg_class c JOIN pg_roles r ON r.oid = c.relowner WHERE c.oid = 'episodes'::regclass"
        ).fetchone()
        assert owner is not None and _denied(conn, f'SET ROLE "{owner["rolname"]}"')


@pytest.mark.citus  # also on the Citus cluster when one is up
def test_secrets_are_unreadable_by_the_app_role_and_the_login_role(db: Database, service_db: Database) -> None:
    assert len(link_secret(service_db)) == 64  # made, through the function granted to the login role
    assert link_secret(db) == link_secret(service_db)
    with service_db.tenant("acme") as conn:
        keys = {r["key"] for r in conn.execute("SELECT key FROM episodes_settings").fetchall()}
        assert not keys & set(SECRET_KEYS)
        assert _denied(conn, "SELECT * FROM episodes_secrets")
        assert _denied(conn, "SELECT episodes_link_secret()")  # the app role may not even ask for it
        conn.execute("RESET ROLE")
        assert _denied(conn, "SELECT * FROM episodes_secrets")
        assert _denied(conn, "SELECT key_hash FROM api_keys")
    with db.admin() as conn:  # the owner still has them
        have = {r["key"] for r in conn.execute("SELECT key FROM episodes_secrets").fetchall()}
    assert have == set(SECRET_KEYS)


def test_no_security_definer_function_is_executable_by_public(db: Database) -> None:
    """Every owner-rights function, today's and any added later: EXECUTE granted to named roles only."""
    with db.admin() as conn:
        rows = conn.execute("""
            SELECT p.oid::regprocedure::text AS fn
            FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
            WHERE p.prosecdef AND n.nspname NOT IN ('pg_catalog', 'information_schema')
              AND (p.proacl IS NULL
                   OR EXISTS (SELECT FROM aclexplode(p.proacl) a WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE'))
        """).fetchall()
        count = conn.execute("SELECT count(*) AS n FROM pg_proc WHERE prosecdef").fetchone()
    assert count is not None and count["n"] >= 5
    assert [r["fn"] for r in rows] == []


def _definer_functions_taking_a_tenant(db: Database) -> list[dict[str, Any]]:
    with db.admin() as conn:
        return conn.execute("""
            SELECT p.oid::regprocedure::text AS fn, p.proname AS name, p.proargnames AS names,
                   p.proargtypes::oid[]::regtype[]::text[] AS types,
                   has_function_privilege('episodes_service', p.oid, 'EXECUTE') AS login
            FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
            WHERE p.prosecdef AND n.nspname = 'public' AND 'tenant' = ANY (p.proargnames)
            ORDER BY 1
        """).fetchall()


def _call(name: str, names: list[str], types: list[str], tenant: str) -> tuple[str, list[object]]:
    samples: dict[str, object] = {"text": "u-1", "boolean": False, "bigint": 1, "integer": 1}
    by_name: dict[str, object] = {"dry": True}  # episodes_scrub_job_runs: only count (u-1 was not erased)
    args = [
        tenant if arg == "tenant" else by_name.get(arg, samples[kind]) for arg, kind in zip(names, types, strict=False)
    ]
    return f"SELECT {name}({', '.join('%s' for _ in args)})", args


def test_every_definer_function_refuses_another_tenant(db: Database, service_db: Database) -> None:
    """Each owner-rights function that takes a tenant, called in acme's transaction for globex, refuses;
    for acme itself it runs. Found from pg_proc, so a function added later is covered too."""
    _seed(db)
    functions = _definer_functions_taking_a_tenant(db)
    assert {f["name"] for f in functions} >= {"episodes_user_hash", "episodes_scrub_job_runs"}
    for f in functions:
        statement, args = _call(f["name"], f["names"], f["types"], "globex")
        own, own_args = _call(f["name"], f["names"], f["types"], "acme")
        with service_db.tenant("acme") as conn:
            assert _denied(conn, statement, *args), f["fn"]
            if not f["login"]:
                assert not _denied(conn, own, *own_args), f["fn"]
        if f["login"]:  # granted to the login role (forget's job-run scrub): the tenant set, no role switched
            with service_db.login() as conn:
                set_local(conn, **{"episodes.tenant_id": "acme"})
                assert _denied(conn, statement, *args), f["fn"]
                assert not _denied(conn, own, *own_args), f["fn"]
        with service_db.login() as conn:  # the login role with no tenant set may not call them at all
            assert _denied(conn, statement, *args), f["fn"]


@pytest.mark.citus  # also on the Citus cluster when one is up
def test_the_login_role_verifies_keys_only_through_its_functions(db: Database, service_db: Database) -> None:
    key, secret = create_key(db, "acme", ["recall"])
    verifier = KeyVerifier(service_db, ttl=0.0)
    found = verifier.verify(secret)
    assert found is not None and found.id == key.id and found.tenant_id == "acme"
    assert verifier.verify(secret[:-1] + ("A" if secret[-1] != "A" else "B")) is None
    assert key_is_live(service_db, key.id) is True
    revoke_key(db, str(key.id))
    assert key_is_live(service_db, key.id) is False and verifier.verify(secret) is None
    assert key_is_live(service_db, key.id + 1000) is False
    with db.admin() as conn:
        used = conn.execute("SELECT last_used_at IS NOT NULL AS used FROM api_keys WHERE id = %s", (key.id,)).fetchone()
    assert used == {"used": True}


def test_every_table_with_a_tenant_column_is_under_row_level_security(db: Database) -> None:
    with db.admin() as conn:
        rows = conn.execute("""
            SELECT c.relname AS name, c.relrowsecurity AS rls
            FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE a.attname = 'tenant_id' AND NOT a.attisdropped AND c.relkind IN ('r', 'p') AND n.nspname = 'public'
        """).fetchall()
    assert len(rows) >= 10
    assert [r["name"] for r in rows if not r["rls"]] == []
    # Tables without a tenant column that can hold a tenant's data: run errors naming users, the secrets.
    with db.admin() as conn:
        others = conn.execute(
            "SELECT relname AS name, relrowsecurity AS rls FROM pg_class "
            "WHERE oid IN ('job_runs'::regclass, 'episodes_secrets'::regclass)"
        ).fetchall()
    assert sorted((r["name"], r["rls"]) for r in others) == [("episodes_secrets", True), ("job_runs", True)]


def _activity(db: Database, application_name: str) -> list[dict[str, Any]]:
    with db.admin() as conn:
        return conn.execute(
            "SELECT usename, application_name FROM pg_stat_activity "
            "WHERE datname = current_database() AND application_name = %s",
            (application_name,),
        ).fetchall()


def _wait_for_activity(
    db: Database, application_name: str, proc: subprocess.Popen[bytes] | None = None
) -> list[dict[str, Any]]:
    def activity() -> list[dict[str, Any]]:
        assert proc is None or proc.poll() is None, "the process ended"
        return _activity(db, application_name)

    return wait_until(activity, 120, f"a connection named {application_name!r}", every=0.2)


@pytest.mark.slow  # `episodes api` in a process of its own
def test_the_api_connects_as_the_login_role_and_names_itself(
    db: Database, service_db: Database, settings: config.Settings
) -> None:
    _, secret = create_key(db, "acme", ["recall"])
    with api_process(settings) as api:
        answer = httpx.get(
            f"{api.url}/v1/users/u-1/episodes", headers={"Authorization": f"Bearer {secret}"}, timeout=60
        )
        assert answer.status_code == 200, answer.text
        rows = _wait_for_activity(db, "episodes api")
    assert {r["usename"] for r in rows} == {SERVICE_ROLE}


@pytest.mark.slow  # `episodes mcp` in a process of its own
def test_the_mcp_server_connects_as_the_login_role_and_names_itself(db: Database, service_db: Database) -> None:
    env = {**os.environ, "DATABASE_URL": db.url, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "jobs.cli", "mcp", "--tenant", "acme", "--user", "u-1"],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        rows = _wait_for_activity(db, "episodes mcp", proc)
    finally:
        proc.terminate()
        proc.communicate(timeout=60)
    assert {r["usename"] for r in rows} == {SERVICE_ROLE}


@pytest.mark.slow  # `episodes mcp` in a process of its own
def test_the_mcp_server_as_the_owner_warns_saying_what_to_set(db: Database) -> None:
    env = {**os.environ, "DATABASE_URL": db.url, "HF_HUB_OFFLINE": "1"}
    env.pop("EPISODES_SERVICE_DATABASE_URL", None)
    done = subprocess.run(
        [sys.executable, "-m", "jobs.cli", "mcp", "--tenant", "acme", "--user", "u-1"],
        env=env,
        input=b"",
        capture_output=True,
        timeout=120,
    )
    assert "EPISODES_SERVICE_DATABASE_URL" in done.stderr.decode() and "superuser" in done.stderr.decode()


def test_the_pool_hands_out_connections_past_descriptor_1024(db: Database) -> None:
    """select() refuses descriptors numbered 1024 or more; the pool's check must not use it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1500:
        if hard != resource.RLIM_INFINITY and hard < 1500:
            pytest.skip(f"the hard limit on open files is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (1500, hard))
    held: list[int] = []
    try:
        while len(held) < 1100:
            held.append(os.open(os.devnull, os.O_RDONLY))
        fresh = Database(db.settings)
        try:
            for _ in range(3):  # the first opens the pool; the later ones take its connection through the check
                with fresh.admin() as conn:
                    assert conn.fileno() >= 1024
                    assert conn.execute("SELECT 1 AS one").fetchone() == {"one": 1}
        finally:
            fresh.close()
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_keys_create_refuses_a_bad_tenant_name_saying_the_rule(db: Database) -> None:
    result = CliRunner().invoke(cli, ["keys", "create", "--tenant", "bad tenant", "--scopes", "recall"])
    assert result.exit_code == 2
    assert "not a tenant name" in result.output and "CheckViolation" not in result.output
    assert "\\x" not in result.output
    with db.admin() as conn:
        assert conn.execute("SELECT count(*) AS n FROM api_keys").fetchone() == {"n": 0}
    long_name = CliRunner().invoke(
        cli, ["keys", "create", "--tenant", "acme", "--scopes", "recall", "--name", "n" * 201]
    )
    assert long_name.exit_code == 2 and "at most 200" in long_name.output


def test_keys_create_warns_about_a_tenant_with_no_data(db: Database) -> None:
    _seed(db)
    unknown = CliRunner().invoke(cli, ["keys", "create", "--tenant", "acmee", "--scopes", "recall"])
    assert unknown.exit_code == 0 and unknown.stdout.startswith("ep_")
    assert "holds no transcript or episode" in unknown.stderr
    known = CliRunner().invoke(cli, ["keys", "create", "--tenant", "acme", "--scopes", "recall"])
    assert known.exit_code == 0 and "holds no" not in known.stderr


@pytest.mark.citus  # also on the Citus cluster when one is up
def test_an_unknown_or_revoked_key_costs_no_write(db: Database, service_db: Database) -> None:
    """Verifying a key anyone can guess is a read: it runs in a READ ONLY transaction (as on a standby) and
    takes no row-exclusive lock on api_keys; only a live key found is marked used (an UPDATE)."""
    key, secret = create_key(db, "acme", ["recall"])
    revoked, revoked_secret = create_key(db, "acme", ["recall"])
    revoke_key(db, str(revoked.id))
    locks = (
        "SELECT array_agg(mode ORDER BY mode) AS modes FROM pg_locks "
        "WHERE pid = pg_backend_pid() AND relation = 'api_keys'::regclass"
    )
    for guess in ("ep_" + "A" * 40, revoked_secret):
        with service_db.login() as conn:
            conn.execute("SET TRANSACTION READ ONLY")
            assert conn.execute("SELECT * FROM episodes_verify_key(%s)", (key_hash(guess),)).fetchall() == []
            assert conn.execute(locks).fetchone() == {"modes": ["AccessShareLock"]}, guess
            assert conn.execute("SELECT txid_current_if_assigned() AS xid").fetchone() == {"xid": None}
    with service_db.login() as conn:
        found = conn.execute("SELECT id FROM episodes_verify_key(%s)", (key_hash(secret),)).fetchall()
        assert conn.execute(locks).fetchone() == {"modes": ["AccessShareLock", "RowExclusiveLock"]}
    assert found == [{"id": key.id}]
    assert KeyVerifier(service_db, ttl=0.0).verify(secret) is not None
    with db.admin() as conn:
        used = {r["id"]: r["used"] for r in conn.execute("SELECT id, last_used_at IS NOT NULL AS used FROM api_keys")}
    assert used == {key.id: True, revoked.id: False}


@pytest.mark.citus  # also on the Citus cluster when one is up
def test_job_runs_are_out_of_the_tenant_roles_reach_and_forget_still_scrubs_them(
    db: Database, service_db: Database
) -> None:
    """job_runs (runs across tenants; a failure's text can name any tenant's user) is the owner's alone:
    row-level security on, no privilege for episodes_app or the login role; forget blanks the runs naming
    the erased user (a whole word, matched literally) after its transaction, also through the service."""
    weird = "u.zoe+1(x)"  # regular-expression characters, matched as themselves
    with db.admin() as conn:
        assert conn.execute(
            "SELECT relrowsecurity AS rls FROM pg_class WHERE oid = 'job_runs'::regclass"
        ).fetchone() == {"rls": True}
        conn.execute(
            "INSERT INTO job_runs (job, worker, status, error, counts) VALUES "
            "('compress', 'w', 'failed', %s, '{}'), ('compress', 'w', 'failed', %s, '{}'), "
            "('compress', 'w', 'ok', NULL, %s), ('compress', 'w', 'failed', 'globex/u-1x: refused', '{}')",
            (f"acme/{weird} 2023: refused", "acme/uXzoe+1(x) 2023: refused", Jsonb({weird: 1})),
        )
        conn.execute("UPDATE job_runs SET tenants = '{acme}' WHERE error IS NULL")  # a run of acme (0029 scopes)
    with service_db.tenant("acme") as conn:
        for statement in (
            "SELECT count(*) FROM job_runs",
            "UPDATE job_runs SET error = NULL",
            "INSERT INTO job_runs (job, worker) VALUES ('x', 'y')",
        ):
            assert _denied(conn, statement), statement
        conn.execute("RESET ROLE")
        assert _denied(conn, "SELECT count(*) FROM job_runs")
        # Blanking run history is refused for a user that was not erased.
        assert _denied(conn, "SELECT episodes_scrub_job_runs('acme', 'u-1', false)")
    dry = forget_user(service_db, "acme", weird, dry_run=True)
    assert dry.counts["job_runs_scrubbed"] == 2
    report = forget_user(service_db, "acme", weird)
    assert report.counts["job_runs_scrubbed"] == 2
    with db.admin() as conn:
        runs = [(r["error"], r["counts"]) for r in conn.execute("SELECT error, counts FROM job_runs ORDER BY id")]
    assert runs == [
        ("error text removed by an erasure", {}),
        ("acme/uXzoe+1(x) 2023: refused", {}),
        (None, {}),
        ("globex/u-1x: refused", {}),
    ]
    assert forget_user(db, "acme", weird).counts["job_runs_scrubbed"] == 0  # as the owner too; nothing left


@pytest.mark.citus  # also on the Citus cluster when one is up
def test_serves_tenant_transactions_log_in_as_the_login_role(db: Database, service_db: Database) -> None:
    """`episodes serve`'s database (Database.for_serve): claims and maintenance as the owner, tenant
    transactions as episodes_service, so RESET ROLE inside one gives a role that reaches no table."""
    _seed(db)
    serve = Database.for_serve(config.load().with_(application_name="episodes serve"))
    try:
        with serve.admin() as conn:
            owner = conn.execute("SELECT session_user AS who").fetchone()
        assert owner is not None and owner["who"] != SERVICE_ROLE
        with serve.tenant("acme") as conn:
            assert conn.execute("SELECT session_user AS who, count(*) AS n FROM episodes").fetchone() == {
                "who": SERVICE_ROLE,
                "n": 1,
            }
            conn.execute("RESET ROLE")
            for table in ("episodes", "transcripts", "job_runs", "api_keys", "episodes_secrets"):
                assert _denied(conn, f"SELECT count(*) FROM {table}"), table
        with serve.tenant_read("acme") as read:
            assert read.conn.execute("SELECT session_user AS who").fetchone() == {"who": SERVICE_ROLE}
    finally:
        serve.close()


@pytest.mark.slow  # `episodes serve` in a process of its own
def test_episodes_serve_summarizes_as_the_login_role(db: Database, service_db: Database) -> None:
    """A session summarised by `episodes serve`: its tenant writes came through episodes_service (the only
    connections of that role named "episodes serve" are its tenant transactions'), its claims as the owner."""
    from jobs.ingest import ingest_records

    now = time.time()
    record = {
        "tenant_id": "acme",
        "user_id": "u-1",
        "session_id": "s-serve",
        "started_at": now - 300,
        "ended_at": now,
        "messages": [
            {"role": "user", "content": "We decided to ship the pricing page Friday."},
            {"role": "assistant", "content": "Noted: pricing page ships Friday."},
        ],
    }
    record["started_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now - 300))
    record["ended_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
    assert not ingest_records(db, [("test:s-serve", record)]).rejected
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EPISODES_", "ANTHROPIC_"))}
    env.update(DATABASE_URL=db.url, EPISODES_SERVICE_DATABASE_URL=service_url(db.url), HF_HUB_OFFLINE="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jobs.cli", "serve", "--extractor", "offline", "--concurrency", "1", "--poll", "1s"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:

        def summarised() -> bool:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else "serve ended"
            with db.admin() as conn:
                done = conn.execute("SELECT count(*) AS n FROM episodes WHERE session_id = 's-serve'").fetchone()
            return done == {"n": 1}

        wait_until(summarised, 180, "serve to summarise session s-serve", every=0.3)
        users = {r["usename"] for r in _activity(db, "episodes serve")}
    finally:
        proc.terminate()
        proc.communicate(timeout=60)
    assert SERVICE_ROLE in users and len(users) == 2, users  # the owner's pool and listener, and the login role
