"""The command line: --help everywhere, one-line errors with exit 1, status, ingest exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import click
import psycopg
import pytest
from click.testing import CliRunner

from jobs import migrate
from jobs.cli import cli


def _commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = [prefix]
    ctx = click.Context(group)
    for name in group.list_commands(ctx):  # the group imports its commands when asked (jobs/cli/commands.py)
        command = group.get_command(ctx, name)
        if isinstance(command, click.Group):
            found.extend(_commands(command, (*prefix, name)))
        else:
            found.append((*prefix, name))
    return found


@pytest.mark.parametrize("path", _commands(cli), ids=lambda p: " ".join(p) or "episodes")
def test_every_command_has_help(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(cli, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output
    doc = cli if not path else cli.get_command(click.Context(cli), path[0])
    assert doc is not None
    assert (doc.help or "").strip(), f"{path} has no help text"


def test_uninitialised_database_gives_one_line_error(blank_db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", blank_db_url)
    result = CliRunner().invoke(cli, ["ingest", __file__])
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [
        "episodes: The database has no episodes schema yet. Run `episodes init` first."
    ]


def test_unreachable_database_gives_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://nobody@127.0.0.1:1/nothing?connect_timeout=2")
    result = CliRunner().invoke(cli, ["status"])
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("episodes: Could not connect to")
    assert "Traceback" not in result.output


def test_init_status_and_ingest_exit_codes(blank_db_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DATABASE_URL", blank_db_url)
    runner = CliRunner()
    first = runner.invoke(cli, ["init"])
    assert first.exit_code == 0 and "applied 0001_schema, 0002_serve" in first.stdout
    again = runner.invoke(cli, ["init"])
    assert again.exit_code == 0 and "no migration to apply" in again.stdout

    good = {
        "tenant_id": "t",
        "user_id": "u",
        "session_id": "s",
        "ended_at": "2025-01-01T00:00:00Z",
        "messages": [{"role": "user", "content": "hi"}],
    }
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps(good) + "\n" + '{"tenant_id": "t"}\n')
    result = runner.invoke(cli, ["ingest", str(path)])
    assert result.exit_code == 1
    assert f"rejected {path}:2: missing field user_id" in result.stderr
    assert result.stderr.count(f"{path}:2") == 1  # once, not again as a log line (issue 31)
    assert "ingested 1 transcript (1 new" in result.stdout

    status = runner.invoke(cli, ["status"])
    assert status.exit_code == 0
    assert f"schema       version {migrate.code_version()} (code {migrate.code_version()})" in status.stdout
    assert "embedder     minilm: all-MiniLM-L6-v2, int8 weights (EPISODES_EMBEDDER)" in status.stdout
    assert "pending 1" in status.stdout


@click.command("scratch-insert")
@click.option("--tenant", required=True)
@click.pass_obj
def _scratch_insert(obj: object, tenant: str) -> None:
    """A command that stores what it is given as is (as a command missing a check would)."""
    from jobs.cli.base import Context

    assert isinstance(obj, Context)
    with obj.database().admin() as conn:
        conn.execute("CREATE TEMP TABLE scratch (tenant_id text CHECK (tenant_id ~ '^[a-z]+$'), secret bytea)")
        conn.execute("INSERT INTO scratch VALUES (%s, %s)", (tenant, b"\x8f\x13very-secret-hash-bytes"))


def test_a_database_error_is_one_line_that_names_what_failed_never_the_row(
    db_url: str, monkeypatch: pytest.MonkeyPatch, db: object
) -> None:
    """A constraint violation that escapes a command is told in one line that names the constraint and says
    what to do; the server's text, which quotes the failing row (here a hash's bytes), is not printed. With
    -v the error itself is raised (the full traceback)."""
    monkeypatch.setenv("DATABASE_URL", db_url)
    cli.add_command(_scratch_insert)
    try:
        result = CliRunner().invoke(cli, ["scratch-insert", "--tenant", "bad tenant"])
        verbose = CliRunner().invoke(cli, ["-v", "scratch-insert", "--tenant", "bad tenant"])
    finally:
        cli.commands.pop("scratch-insert")
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("episodes scratch-insert: the database refused a value"), lines[0]
    assert "scratch_tenant_id_check" in lines[0] and "-v" in lines[0]
    for leak in ("Failing row", "very-secret", "\\x8f13", "bad tenant", "DETAIL"):
        assert leak not in result.output
    assert isinstance(verbose.exception, psycopg.errors.CheckViolation)
    assert "Failing row" in str(verbose.exception)  # all there under -v


@pytest.mark.parametrize(
    "args",
    [
        ["export", "--tenant", "acme", "--user", "a\x00b"],
        ["recall", "--tenant", "acme", "--user", "u1", "hel\x00lo"],
        ["forget", "--tenant", "acme", "--episode", "9223372036854775808"],
    ],
)
def test_bad_input_to_commands_is_told_without_a_raw_database_error(
    db_url: str, monkeypatch: pytest.MonkeyPatch, db: object, args: list[str]
) -> None:
    monkeypatch.setenv("DATABASE_URL", db_url)
    result = CliRunner().invoke(cli, args)
    assert result.exit_code in (1, 2), result.output
    last = result.stderr.strip().splitlines()[-1]
    assert "unexpected error" not in last and "Traceback" not in result.output
    assert "NUL" in last or "9223372036854775807" in last, last


def test_db_stop_stops_the_embedded_server_and_refuses_under_other_programs(tmp_path: Path) -> None:
    """The embedded PostgreSQL keeps running after every command (issue 31: nothing said so or how to stop
    it): `episodes db stop` stops it, not under a connected program unless --force, and says so when it
    is not running; `episodes --help` tells of it."""
    from jobs import config
    from jobs.db import start_embedded

    pgdata = config.load().pgdata  # $EPISODES_HOME/pgdata: the test's own (conftest clean_env)
    url = start_embedded(pgdata)
    runner = CliRunner()
    try:
        with psycopg.connect(url, application_name="episodes serve"):
            refused = runner.invoke(cli, ["db", "stop"])
        assert refused.exit_code == 1
        assert "1 connection to the embedded PostgreSQL (episodes serve)" in refused.stderr
        assert "--force" in refused.stderr
        stopped = runner.invoke(cli, ["db", "stop"])
        assert stopped.exit_code == 0, stopped.output
        assert stopped.stdout.startswith(f"stopped the embedded PostgreSQL in {pgdata}")
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(url, connect_timeout=2).close()
        again = runner.invoke(cli, ["db", "stop"])
        assert again.exit_code == 0 and "is not running; nothing to stop" in again.stdout
    finally:
        runner.invoke(cli, ["db", "stop", "--force"])
    assert "`episodes db stop` stops it" in " ".join(runner.invoke(cli, ["--help"]).stdout.split())
