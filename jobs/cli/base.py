"""The command group, defined once: settings, logging, the lazily opened database, and errors
turned into one line on stderr with exit status 1 (tracebacks only with -v).

Commands live in their own modules (jobs/cli/*.py) and import this one; jobs/cli/__init__.py
registers them on the group. Nothing here imports a command module, so the imports run one way."""

from __future__ import annotations

import datetime as dt
import logging

import click

from jobs import config, logs, migrate
from jobs.db import Database
from jobs.errors import EpisodesError, SchemaNotInitialised

log = logging.getLogger("jobs.cli")


class Context:
    """What every command gets: settings and a lazily opened database."""

    def __init__(self, verbose: bool) -> None:
        self.verbose = verbose
        self.settings = config.load()
        self._db: Database | None = None

    def database(self, *, require_schema: bool = True) -> Database:
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
                raise migrate.SchemaTooNew()
        return self._db

    def close(self) -> None:
        if self._db is not None:
            self._db.close()


class _Group(click.Group):
    """Turns EpisodesError (and unexpected errors) into one line on stderr and exit status 1."""

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
        except Exception as exc:  # noqa: BLE001 - the CLI boundary
            if _verbose(ctx):
                raise
            click.echo(f"episodes: unexpected error: {type(exc).__name__}: {_one_line(exc)} (run with -v for details)",
                       err=True)
            ctx.exit(1)
        finally:
            if isinstance(ctx.obj, Context):
                ctx.obj.close()
        return None


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _verbose(ctx: click.Context) -> bool:
    return isinstance(ctx.obj, Context) and ctx.obj.verbose


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", is_flag=True, help="Debug logging and full tracebacks on errors.")
@click.version_option(package_name="episodes")
@click.pass_context
def cli(ctx: click.Context, verbose: bool) -> None:
    """Long-term episodic memory for AI agents, on PostgreSQL.

    Configuration comes from environment variables (see the README). With DATABASE_URL unset an
    embedded PostgreSQL is started in $EPISODES_HOME.
    """
    ctx.obj = Context(verbose)
    settings = ctx.obj.settings
    logs.setup(settings.log_format, "DEBUG" if verbose else settings.log_level)




class Duration(click.ParamType):
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


def utc(moment: dt.datetime | None) -> dt.datetime | None:
    """A --since/--now option's naive time read as UTC (as the help texts say)."""
    return moment.replace(tzinfo=dt.UTC) if moment is not None and moment.tzinfo is None else moment


EXTRACTOR_HELP = "auto (default): Claude when ANTHROPIC_API_KEY is set, else the offline extractor."
