"""An analyst connects to the database episodes uses (issue 35, item 12): `episodes db url` prints a URL
psql and BI tools take, `episodes db psql` runs the psql that ships with the embedded server (the
system's may be older than PostgreSQL 18), and `--analyst TENANT` makes either the read-only analyst of
one tenant. Run as a user would, in a child process of the installed command."""

from __future__ import annotations

import os
import subprocess
import sys

import psycopg
from click.testing import CliRunner
from psycopg.conninfo import conninfo_to_dict

from jobs.cli import cli
from jobs.cli.db_connect import server_psql
from jobs.config import Settings
from jobs.db import Database


def episodes(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jobs.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
        check=False,
    )


def test_db_url_is_a_url_psql_and_psycopg_take(db: Database) -> None:
    result = CliRunner().invoke(cli, ["db", "url"])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == db.url
    analyst = CliRunner().invoke(cli, ["db", "url", "--analyst", "acme"]).stdout.strip()
    with psycopg.connect(analyst) as conn:
        row = conn.execute(
            "SELECT current_user, current_setting('episodes.tenant_id'), current_setting('transaction_read_only')"
        ).fetchone()
    assert row == ("episodes_analyst", "acme", "on")


def test_db_psql_runs_the_servers_own_psql(db: Database) -> None:
    with psycopg.connect(db.url) as conn:
        server = conn.info.server_version // 10000
    version = subprocess.run([str(server_psql()), "--version"], capture_output=True, text=True, check=True).stdout
    assert f"(PostgreSQL) {server}." in version  # never older than the server

    result = episodes("db", "psql", "-Atc", "SELECT count(*) FROM analyst.decisions")
    assert result.returncode == 0 and result.stdout.strip() == "0", result.stderr
    result = episodes("db", "psql", "--analyst", "acme", "-Atc", "SELECT current_user")
    assert result.stdout.strip() == "episodes_analyst", result.stderr
    refused = episodes("db", "psql", "--analyst", "acme", "-Atc", "CREATE TABLE scratch (a int)")
    assert refused.returncode != 0 and "read-only transaction" in refused.stderr


def test_a_tenant_that_would_break_the_options_is_refused(db: Database) -> None:
    result = CliRunner().invoke(cli, ["db", "url", "--analyst", "acme -c role=postgres"])
    assert result.exit_code == 1 and "--analyst needs a tenant id" in result.output


def test_the_password_stays_off_the_command_line() -> None:
    from jobs.cli.db_connect import with_options, without_password

    assert without_password("postgresql://ann:s%40cret@db.example:5432/ep?sslmode=require") == (
        "postgresql://ann@db.example:5432/ep?sslmode=require",
        "s@cret",
    )
    rest, password = without_password("host=db.example dbname=ep user=ann password=s3cret")
    assert password == "s3cret" and conninfo_to_dict(rest) == {"host": "db.example", "dbname": "ep", "user": "ann"}
    assert "options='-c role=episodes_analyst" in with_options("host=/tmp/x dbname=ep", "acme")


def test_what_a_database_shows_of_its_address_holds_no_secret() -> None:
    """`episodes init`, `status` and `claude-code install` print Database.location: neither the password nor the
    client key's sslpassword (issue 46 #9)."""
    url = "postgresql://ann:s3cret-pw@db.example:5432/ep?sslmode=verify-full&sslpassword=key-passphrase-7"
    shown = Database(Settings(), url=url).location
    assert "s3cret-pw" not in shown and "key-passphrase-7" not in shown
    assert conninfo_to_dict(shown) == {
        "user": "ann",
        "password": "***",
        "host": "db.example",
        "port": "5432",
        "dbname": "ep",
        "sslmode": "verify-full",
        "sslpassword": "***",
    }
