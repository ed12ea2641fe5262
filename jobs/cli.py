"""The `episodes` command line. Every command has --help; errors are one line on stderr, exit 1."""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

import click

from jobs import config, logs, migrate
from jobs.db import Database
from jobs.embeddings import get_embedder
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


@cli.command()
@click.pass_obj
def init(obj: Context) -> None:
    """Create the schema, or upgrade it to this version (safe to run again)."""
    db = obj.database(require_schema=False)
    embedder = get_embedder(obj.settings.embedder)
    with db.connect() as conn:
        applied = migrate.migrate(conn, embedding_dim=embedder.dim, embedder=embedder.name)
    if applied:
        names = ", ".join(f"{m.version:04d}_{m.name}" for m in applied)
        click.echo(f"Initialised {db.location}: applied {names}.")
    else:
        click.echo(f"Schema already at version {migrate.code_version()} in {db.location}; nothing to do.")


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["auto", "locomo"]), default="auto", show_default=True,
              help="auto: our JSON / JSONL transcript format; locomo: LoCoMo conversation files.")
@click.option("--tenant", help="Tenant for records that name none (LoCoMo default: locomo).")
@click.pass_obj
def ingest(obj: Context, paths: tuple[Path, ...], fmt: str, tenant: str | None) -> None:
    """Load transcripts from JSON / JSONL files or directories.

    Bad records are reported as FILE:LINE: REASON and skipped; the others load. The exit status
    is 1 when anything was rejected.
    """
    from tqdm import tqdm

    from jobs.ingest import ingest as run_ingest

    db = obj.database()
    started = time.perf_counter()
    with tqdm(desc="ingest", unit="rec", file=sys.stderr, disable=None) as bar:
        report = run_ingest(db, list(paths), fmt=fmt, tenant_id=tenant, progress=bar.update)
    elapsed = time.perf_counter() - started
    for rejection in report.rejected:
        click.echo(f"rejected {rejection}", err=True)
    click.echo(
        f"ingested {report.loaded} transcripts ({report.inserted} new, {report.updated} changed, "
        f"{report.unchanged} unchanged), rejected {len(report.rejected)} in {elapsed:.1f}s"
    )
    if report.rejected:
        sys.exit(1)


@cli.command()
@click.option("--limit", type=click.IntRange(min=1), help="Process at most this many transcripts.")
@click.option("--tenant", help="Only this tenant's transcripts.")
@click.option("--since", type=click.DateTime(), help="Only sessions that ended at or after this time (UTC).")
@click.option("--extractor", type=click.Choice(["auto", "anthropic", "offline"]), default=None,
              help="auto (default): Claude when ANTHROPIC_API_KEY is set, else the offline extractor.")
@click.option("--concurrency", type=click.IntRange(1, 256), default=4, show_default=True,
              help="Transcripts processed at once (threads).")
@click.option("--batch", is_flag=True,
              help="Backfill through the Message Batches API (half price, results within 24 h). Resumes open "
                   "batches left by an earlier run.")
@click.option("--no-wait", is_flag=True, help="With --batch: submit and return; a later --batch run collects.")
@click.option("--batch-poll", type=click.FloatRange(min=0.1), default=30.0, show_default=True,
              help="With --batch: seconds between status checks.")
@click.pass_obj
def run(obj: Context, limit: int | None, tenant: str | None, since: object, extractor: str | None,
        concurrency: int, batch: bool = False, no_wait: bool = False, batch_poll: float = 30.0) -> None:
    """Summarise every eligible (closed, not yet summarised) transcript once."""
    import datetime as dt

    from tqdm import tqdm

    from jobs.extract import make_extractor
    from jobs.summarize import count_eligible, run_summarize

    db = obj.database()
    since_utc = since.replace(tzinfo=dt.UTC) if isinstance(since, dt.datetime) else None
    if batch:
        from jobs.summarize import BatchRunner
        from jobs.extract.claude import AnthropicExtractor

        with AnthropicExtractor(obj.settings) as claude:
            report = BatchRunner(db, claude).run(limit=limit, tenant=tenant, since=since_utc, wait=not no_wait,
                                                 poll_seconds=batch_poll)
        click.echo(report.line())
        return
    chosen = make_extractor(obj.settings, extractor)
    if chosen.name == "offline":
        click.echo("Using the offline extractor (no ANTHROPIC_API_KEY): deterministic, lower quality than Claude.",
                   err=True)
    total = count_eligible(db, tenant, since_utc)
    if limit is not None:
        total = min(total, limit)
    try:
        with tqdm(total=total, desc="summarize", unit="ep", file=sys.stderr, disable=None) as bar:
            report = run_summarize(db, extractor=chosen, limit=limit, tenant=tenant, since=since_utc,
                                   concurrency=concurrency, progress=bar.update)
    finally:
        if hasattr(chosen, "close"):
            chosen.close()
    click.echo(report.line())


class Duration(click.ParamType):
    """A duration such as 90s, 15m, 2h or 1d (plain numbers are seconds)."""

    name = "duration"
    _UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, (int, float)):
            return float(value)
        text = str(value).strip().lower()
        try:
            if text and text[-1] in self._UNITS:
                return float(text[:-1]) * self._UNITS[text[-1]]
            return float(text)
        except ValueError:
            self.fail(f"{value!r} is not a duration like 90s, 15m, 2h or 1d", param, ctx)


@cli.command()
@click.option("--concurrency", type=click.IntRange(1, 256), default=4, show_default=True,
              envvar="EPISODES_SERVE_CONCURRENCY", show_envvar=True, help="Summarize worker threads.")
@click.option("--poll", "poll", type=Duration(), default="10s", show_default=True, envvar="EPISODES_POLL_INTERVAL",
              show_envvar=True, help="Fallback poll interval (LISTEN/NOTIFY wakes workers at once).")
@click.option("--maintenance", "maintenance", type=Duration(), default="30s", show_default=True,
              envvar="EPISODES_MAINTENANCE_INTERVAL", show_envvar=True,
              help="How often expired claims are rescued and idle sessions closed.")
@click.option("--compress-cron", default="0 3 1 1 *", show_default=True, envvar="EPISODES_COMPRESS_CRON",
              show_envvar=True, help="Crontab (UTC) for the compress job; default yearly on 1 January.")
@click.option("--idle-close", type=Duration(), default=None, envvar="EPISODES_IDLE_CLOSE", show_envvar=True,
              help="Treat an open session with no new message for this long as closed (e.g. 30m).")
@click.option("--shutdown-deadline", type=Duration(), default="30s", show_default=True,
              envvar="EPISODES_SHUTDOWN_DEADLINE", show_envvar=True,
              help="On SIGTERM/SIGINT, how long in-flight work may take before its claims are released.")
@click.option("--extractor", type=click.Choice(["auto", "anthropic", "offline"]), default=None,
              help="auto (default): Claude when ANTHROPIC_API_KEY is set, else the offline extractor.")
@click.pass_obj
def serve(obj: Context, concurrency: int, poll: float, maintenance: float, compress_cron: str,
          idle_close: float | None, shutdown_deadline: float, extractor: str | None) -> None:
    """Run the scheduler: summarize on NOTIFY (and poll), maintenance, yearly compression."""
    from jobs.extract import make_extractor
    from jobs.serve import ServeOptions, Server

    db = obj.database()
    chosen = make_extractor(obj.settings, extractor)
    options = ServeOptions(concurrency=concurrency, poll_seconds=poll, maintenance_seconds=maintenance,
                           compress_cron=compress_cron, idle_close_seconds=idle_close,
                           shutdown_deadline=shutdown_deadline)
    try:
        counts = Server(db, chosen, options, compress=_compress_job()).run()
    finally:
        if hasattr(chosen, "close"):
            chosen.close()
    click.echo("stopped: " + " · ".join(f"{k} {v}" for k, v in sorted(counts.items())))


def _compress_job():  # noqa: ANN202
    """The compress job for the scheduler, once compression is installed."""
    try:
        from jobs.compress import scheduled_compress
    except ImportError:
        return None
    return scheduled_compress


@cli.command()
@click.option("--tenant", help="Only this tenant's dead letters.")
@click.pass_obj
def retry(obj: Context, tenant: str | None) -> None:
    """Requeue dead-lettered transcripts (after fixing the cause); `episodes run` picks them up."""
    from jobs.summarize import retry_dead

    n = retry_dead(obj.database(), tenant)
    click.echo(f"requeued {n} dead-lettered transcripts")


@cli.command()
@click.pass_obj
def status(obj: Context) -> None:
    """Show where the data lives, the schema version, the queue and the last job runs."""
    from jobs.status import render_status

    click.echo(render_status(obj.database(require_schema=False)))


@cli.command()
@click.pass_context
def demo(ctx: click.Context) -> None:
    """Initialise the database, load the bundled example transcripts, summarise them, compress the old
    year, show the status and what an agent would recall at its next session."""
    from jobs.resources import examples_dir

    ctx.invoke(init)
    paths = [Path(str(p)) for p in examples_dir().iterdir() if p.name.endswith(".jsonl")]
    obj: Context = ctx.obj
    from jobs.ingest import ingest as run_ingest

    report = run_ingest(obj.database(), sorted(paths))
    click.echo(f"Loaded example transcripts: {report.inserted} new, {report.updated} changed, "
               f"{report.unchanged} unchanged, {len(report.rejected)} rejected.")
    ctx.invoke(run, limit=None, tenant=None, since=None, extractor=None, concurrency=4, batch=False)
    click.echo("Compressing years that ended more than 12 months ago into super-summaries:")
    ctx.invoke(compress_command, older_than="12mo", period="year", tenant=None, user_id=None, dry_run=False,
               extractor=None, purge_embeddings=False, concurrency=2, now=None)
    ctx.invoke(status)
    question = "Can we look at our Snowflake costs again before the renewal?"
    click.echo(f"\nWhat an agent would load for acme/u-maria opening with {question!r}:\n")
    ctx.invoke(recall_command, opening_message=question, tenant="acme", user_id="u-maria", purpose=None,
               budget=800, now=None, as_json=False)


# Commands defined in their own modules, registered here.
from jobs.cli_compress import compress_command  # noqa: E402
from jobs.cli_privacy import export_command, forget_command  # noqa: E402
from jobs.cli_recall import eval_group, recall_command  # noqa: E402
from jobs.cli_report import report_command  # noqa: E402

cli.add_command(compress_command)
cli.add_command(recall_command)
cli.add_command(eval_group)
cli.add_command(report_command)
cli.add_command(forget_command)
cli.add_command(export_command)


def main() -> None:
    cli(prog_name="episodes")


if __name__ == "__main__":
    main()
