"""The command group, defined once: settings, logging, the lazily opened database, and errors
turned into one line on stderr with exit status 1 (tracebacks only with -v).

Commands live in their own modules (jobs/cli/*.py) and import this one; the group finds them through
the table in jobs/cli/commands.py and imports a command's module only when that command runs or is
asked for its --help. So this module imports only what `episodes --help` needs (click, jobs.config,
jobs.errors, jobs.logs): psycopg, jobs.db and jobs.migrate are imported where a database is used."""

from __future__ import annotations

import datetime as dt
import importlib
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import click

from jobs import config, logs
from jobs.cli.commands import COMMANDS, LazyCommand
from jobs.config_values import CRON
from jobs.errors import EpisodesError, SchemaNotInitialised, SchemaTooNew

if TYPE_CHECKING:
    import psycopg

    from jobs.db import Database

log = logging.getLogger("jobs.cli")


class Context:
    """What every command gets: settings and a lazily opened database."""

    def __init__(self, verbose: bool) -> None:
        self.verbose = verbose
        self.settings = config.load()
        self._db: Database | None = None

    def database(self, *, require_schema: bool = True) -> Database:
        from jobs import migrate
        from jobs.db import Database

        if self._db is None:
            self._db = Database(self.settings)
        if require_schema:
            with self._db.connect(autocommit=True) as conn:
                have = migrate.current_version(conn)
            if not have:
                raise SchemaNotInitialised()
            if have < migrate.code_version():
                raise SchemaNotInitialised(
                    f"The database schema is at version {have}; this code needs {migrate.code_version()}. "
                    "Run `episodes init` to upgrade it."
                )
            if have > migrate.code_version():
                raise SchemaTooNew()
        return self._db

    def close(self) -> None:
        if self._db is not None:
            self._db.close()


class _Group(click.Group):
    """Finds its commands in a table of lazily imported ones (jobs/cli/commands.py) besides any added with
    ``add_command``; turns EpisodesError, database errors (:func:`database_error`) and unexpected errors
    into one line on stderr and exit status 1."""

    def __init__(self, *args: Any, lazy: Mapping[str, LazyCommand] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy: dict[str, LazyCommand] = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command, its module imported the first time it is asked for (then kept in ``commands``)."""
        if cmd_name not in self.commands and cmd_name in self.lazy:
            self.commands[cmd_name] = load_command(cmd_name, self.lazy[cmd_name])
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands section of --help, from the table for commands not imported yet (the same line
        click would write: tests/test_cli_start.py compares the two)."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = []
        for name in names:
            command = self.commands.get(name)
            if command is None:
                # a stand-in command with the table's help: click shortens it to this width the same way
                command = click.Command(name, help=self.lazy[name].short_help)
            if not command.hidden:
                rows.append((name, command.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort):
            raise
        except EpisodesError as exc:
            if _verbose(ctx):
                raise
            click.echo(f"episodes: {_one_line(exc)}", err=True)
            ctx.exit(1)
        except Exception as exc:
            if _verbose(ctx):
                raise
            import psycopg  # here, not at the top: `episodes --help` never needs it

            if isinstance(exc, psycopg.Error):
                click.echo(f"episodes {ctx.invoked_subcommand or ''}".rstrip() + f": {database_error(exc)}", err=True)
                ctx.exit(1)
            click.echo(
                f"episodes: unexpected error: {type(exc).__name__}: {_one_line(exc)} (run with -v for details)",
                err=True,
            )
            ctx.exit(1)
        finally:
            if isinstance(ctx.obj, Context):
                ctx.obj.close()
        return None


# What each class of SQLSTATE means for the one who ran the command, and what to do (the first two
# characters are the class; a longer key is one condition of it).
_SQLSTATE_ADVICE = {
    "23": "the database refused a value{names}. Check the ids and values given (a tenant id is 1-128 of "
    "A-Z a-z 0-9 _ . : @ -)",
    "22": "a value is malformed or out of range for the database{names}. Check the values given (ids are whole "
    "numbers up to 9223372036854775807; text cannot hold NUL bytes)",
    "42501": "the database role may not do this{names}. Run it with the owner's DATABASE_URL",
    "42": "the database schema is not what this version of episodes expects{names}. Run `episodes init`",
    "40": "the database stopped this transaction (a conflict with another one){names}. Run it again",
    "57014": "the database cancelled a statement (a statement timeout or an operator). Run it again",
    "53": "the database server is out of resources (disk, memory or connections){names}. Ask its operator",
    "08": "the connection to the database failed. Check that it is running and DATABASE_URL, then run it again",
    "57": "the database server is shutting down or restarting. Run it again when it is back",
}


def database_error(exc: psycopg.Error) -> str:
    """A database error that escaped a command, in one line: what failed and what to do.

    Built from the error's class and the names it carries (constraint, table, column), never from its
    text: the server quotes the failing row there (``DETAIL: Failing row contains (...)``: a key's hash,
    a user's message). psycopg's own errors (no SQLSTATE: the value never left this process) are told
    in its words, which hold no data. ``-v`` raises the error itself, with everything."""
    import psycopg

    state = exc.sqlstate
    kind = type(exc).__name__
    if state is None:
        if isinstance(exc, psycopg.OperationalError):
            return (
                f"the connection to the database failed ({kind}: {_one_line(exc)[:200]}). Check that it is "
                "running and DATABASE_URL, then run it again"
            )
        return f"a value cannot be sent to the database: {_one_line(exc)[:200]}. Check the values given"
    diag = exc.diag
    found = [
        f"{label} {value}"
        for label, value in (
            ("constraint", diag.constraint_name),
            ("table", diag.table_name),
            ("column", diag.column_name),
            ("type", diag.datatype_name),
        )
        if value
    ]
    names = f" ({kind}{': ' + ', '.join(found) if found else ''})"
    advice = _SQLSTATE_ADVICE.get(state) or _SQLSTATE_ADVICE.get(state[:2])
    if advice is None:
        return f"the database reported an error{names}, SQLSTATE {state}. Run with -v for its full text"
    return advice.format(names=names) + "; run with -v for the database's full error"


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _verbose(ctx: click.Context) -> bool:
    return isinstance(ctx.obj, Context) and ctx.obj.verbose


def load_command(name: str, entry: LazyCommand) -> click.Command:
    """Import the command ``entry.target`` ("module:attribute") names."""
    module_name, _, attribute = entry.target.partition(":")
    command = getattr(importlib.import_module(module_name), attribute)
    if not isinstance(command, click.Command) or command.name != name:
        raise TypeError(f"jobs/cli/commands.py: {entry.target} is not the click command {name!r}; fix the table")
    return command


@click.group(cls=_Group, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", is_flag=True, help="Debug logging and full tracebacks on errors.")
@click.version_option(package_name="episodes")
@click.pass_context
def cli(ctx: click.Context, verbose: bool) -> None:
    """Long-term episodic memory for AI agents, on PostgreSQL.

    Configuration comes from environment variables (docs/configuration.md). With DATABASE_URL unset an
    embedded PostgreSQL is started in $EPISODES_HOME; it keeps running after each command, so the next
    one starts at once: `episodes db stop` stops it.
    """
    ctx.obj = Context(verbose)
    # Every connection says which command made it, in pg_stat_activity: "episodes serve", "episodes api"...
    ctx.obj.settings = settings = ctx.obj.settings.with_(application_name=f"episodes {ctx.invoked_subcommand or 'cli'}")
    logs.setup(settings.log_format, "DEBUG" if verbose else settings.log_level)


class Duration(click.ParamType[float]):
    """A duration such as 90s, 15m, 2h or 1d (plain numbers are seconds)."""

    name = "duration"

    def __init__(self, allow_off: bool = False) -> None:
        self.allow_off = allow_off  # "off" (or 0) means 0.0: the feature is disabled

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, (int, float)):
            return float(value)
        if self.allow_off and str(value).strip().lower() == "off":
            return 0.0
        try:
            return config.parse_duration(str(value))
        except EpisodesError:
            self.fail(f"{value!r} is not a duration like 90s, 15m, 2h or 1d", param, ctx)


class Cron(click.ParamType[str]):
    """A crontab line (UTC), checked as EPISODES_COMPRESS_CRON is (jobs.config_values.CRON): a wrong one stops
    the command line, not the scheduler's start."""

    name = "crontab"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> str:
        name = f"--{param.name.replace('_', '-')}" if param is not None and param.name else "crontab"
        try:
            return str(CRON.parse(name, str(value).strip()))
        except EpisodesError as exc:
            self.fail(str(exc), param, ctx)


def utc(moment: dt.datetime | None) -> dt.datetime | None:
    """A --since/--now option's naive time read as UTC (as the help texts say)."""
    return moment.replace(tzinfo=dt.UTC) if moment is not None and moment.tzinfo is None else moment


EXTRACTOR_HELP = (
    "Who summarizes: anthropic, claude-code (your Claude Code login; spends your subscription), "
    "openai (OPENAI_BASE_URL), offline, or another installed back end (docs/extractors.md). "
    "auto (default): anthropic when ANTHROPIC_API_KEY is set, else openai when OPENAI_BASE_URL "
    "is, else offline. [env EPISODES_EXTRACTOR]"
)
OFFLINE_NOTICE = (
    "Using the offline {what}: deterministic, lower quality than a model (no ANTHROPIC_API_KEY or "
    "OPENAI_BASE_URL; --extractor claude-code summarises with your Claude Code login: docs/extractors.md)."
)
