"""`episodes run`, `episodes serve` and `episodes retry`: the summarize job, once or scheduled.

The jobs are imported inside the commands: `episodes --help` and the other commands do not pay
for the model SDK and the scheduler.
"""

from __future__ import annotations

import datetime as dt
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import click
from tqdm import tqdm

from jobs.cli.base import EXTRACTOR_HELP, OFFLINE_NOTICE, Context, Cron, Duration, utc
from jobs.config import Settings
from jobs.errors import EpisodesError
from jobs.wording import counted


@click.command()
@click.option("--limit", type=click.IntRange(min=1), help="Process at most this many transcripts.")
@click.option("--tenant", help="Only this tenant's transcripts.")
@click.option("--since", type=click.DateTime(), help="Only sessions that ended at or after this time (UTC).")
@click.option("--extractor", metavar="NAME", default=None, help=EXTRACTOR_HELP)
@click.option(
    "--concurrency",
    type=click.IntRange(1, 256),
    default=4,
    show_default=True,
    help="Transcripts processed at once (threads).",
)
@click.option(
    "--batch",
    is_flag=True,
    help="Backfill through the Message Batches API (half price, results within 24 h). Resumes open "
    "batches left by an earlier run.",
)
@click.option("--no-wait", is_flag=True, help="With --batch: submit and return; a later --batch run collects.")
@click.option(
    "--batch-poll",
    type=click.FloatRange(min=0.1),
    default=30.0,
    show_default=True,
    help="With --batch: seconds between status checks.",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print what the queued sessions would cost with the chosen back end (and how much of a daily "
    "cap is left), calling no model and claiming nothing.",
)
@click.pass_obj
def run(
    obj: Context,
    limit: int | None,
    tenant: str | None,
    since: dt.datetime | None,
    extractor: str | None,
    concurrency: int,
    batch: bool = False,
    no_wait: bool = False,
    batch_poll: float = 30.0,
    dry_run: bool = False,
) -> None:
    """Summarise every eligible (closed, not yet summarised) transcript once.

    \b
    Exit status:
      0    every session claimed was summarised, skipped, or dead-lettered for its own content
      1    a wrong setting, or a session failed on the model's answer or call (the reason on stderr)
      130  interrupted (Ctrl-C, SIGTERM): claims given back, the rest stays queued
    """
    from jobs.extract import make_extractor
    from jobs.extract.claude import AnthropicExtractor
    from jobs.summarize import BatchRunner, count_eligible, run_summarize

    db = obj.database()
    since_utc = utc(since)
    if dry_run:
        click.echo(dry_run_line(obj, extractor, limit=limit, tenant=tenant, since=since_utc))
        return
    if batch:
        with AnthropicExtractor(obj.settings) as claude:
            batches = BatchRunner(db, claude).run(
                limit=limit, tenant=tenant, since=since_utc, wait=not no_wait, poll_seconds=batch_poll
            )
        click.echo(batches.line())
        return
    chosen = make_extractor(obj.settings, extractor)
    if chosen.name == "offline":
        click.echo(OFFLINE_NOTICE.format(what="extractor"), err=True)
    total = count_eligible(db, tenant, since_utc)
    if limit is not None:
        total = min(total, limit)
    interrupt = threading.Event()
    try:
        with (
            stop_on_signals(interrupt),
            tqdm(total=total, desc="summarize", unit="ep", file=sys.stderr, disable=None) as bar,
        ):
            report = run_summarize(
                db,
                extractor=chosen,
                limit=limit,
                tenant=tenant,
                since=since_utc,
                concurrency=concurrency,
                progress=bar.update,
                interrupt=interrupt,
            )
    finally:
        chosen.close()
    click.echo(f"{report.line()} · {made_by(obj.settings, extractor, chosen.name)}")
    if report.interrupted:
        left = count_eligible(db, tenant, since_utc)
        click.echo(
            f"interrupted: no new sessions taken; {counted(report.released, 'claim')} given back; "
            f"{counted(left, 'session')} still queued (`episodes run` goes on with them)",
            err=True,
        )
        click.get_current_context().exit(INTERRUPTED_EXIT)
    if report.all_calls_failed:
        raise EpisodesError(report.failure())
    if report.model_failures:
        raise EpisodesError(report.model_failure_line())


def made_by(settings: Settings, asked: str | None, model: str) -> str:
    """Which back end and model the run's episodes come from, e.g. ``by claude-code (claude-haiku-4-5)``."""
    backend = settings.resolved_extractor if asked in (None, "", "auto") else asked
    model = model.removeprefix(f"{backend}:")
    return f"by {backend}" if model == backend else f"by {backend} ({model})"


def dry_run_line(
    obj: Context, extractor: str | None, *, limit: int | None, tenant: str | None, since: dt.datetime | None
) -> str:
    """`run --dry-run`: the queued sessions priced for the chosen back end (jobs.summarize.backlog)."""
    from jobs.extract import make_extractor
    from jobs.lifecycle.resummarize import DEFAULT_OUTPUT_TOKENS, LINE_TOKENS, fixed_prompt_tokens
    from jobs.summarize.backlog import estimate_backlog

    chosen = make_extractor(obj.settings, extractor)  # builds its client; calls nothing
    try:
        name = chosen.name
    finally:
        chosen.close()
    return estimate_backlog(
        obj.database(),
        name,
        fixed_tokens=fixed_prompt_tokens(),
        line_tokens=LINE_TOKENS,
        default_output_tokens=DEFAULT_OUTPUT_TOKENS,
        tenant=tenant,
        since=since,
        limit=limit,
    ).line()


INTERRUPTED_EXIT = 130  # 128 + SIGINT, what a shell reports for a command stopped by Ctrl-C


@contextmanager
def stop_on_signals(interrupt: threading.Event) -> Iterator[None]:
    """While inside: SIGINT (Ctrl-C) and SIGTERM set ``interrupt`` instead of raising
    KeyboardInterrupt in whatever the main thread is doing; the previous handlers come back after."""

    def handle(signum: int, frame: object) -> None:
        interrupt.set()

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@click.command()
@click.option(
    "--concurrency",
    type=click.IntRange(1, 256),
    default=None,
    help="Summarize worker threads. [env EPISODES_SERVE_CONCURRENCY; default: 4]",
)
@click.option(
    "--poll",
    "poll",
    type=Duration(),
    default=None,
    help="Fallback poll interval (LISTEN/NOTIFY wakes workers at once). [default: 10s]",
)
@click.option(
    "--maintenance",
    "maintenance",
    type=Duration(),
    default=None,
    help="How often expired claims are rescued and idle sessions closed. [default: 30s]",
)
@click.option(
    "--compress-cron",
    type=Cron(),
    default=None,
    help="Crontab (UTC) for the compress job. [env EPISODES_COMPRESS_CRON; default: '0 3 1 1 *', yearly on 1 January]",
)
@click.option(
    "--idle-close",
    type=Duration(allow_off=True),
    default=None,
    help="Treat an open session with no new message for this long as closed; off or 0 never does. "
    "[env EPISODES_IDLE_CLOSE; default: 30m]",
)
@click.option(
    "--shutdown-deadline",
    type=Duration(),
    default=None,
    help="On SIGTERM/SIGINT, how long in-flight work may take before its claims are released. [default: 30s]",
)
@click.option("--extractor", metavar="NAME", default=None, help=EXTRACTOR_HELP)
@click.option(
    "--claude-code-sync",
    "claude_code_sync",
    is_flag=True,
    help="Also store this machine's finished Claude Code sessions every 5 minutes, as `episodes "
    "claude-code sync` does (what a SessionEnd hook could not hand over).",
)
@click.option(
    "--claude-code-tenant",
    default=None,
    help="With --claude-code-sync: the tenant of the sessions [default: as `episodes claude-code install` "
    "was told, else local].",
)
@click.option(
    "--claude-code-user",
    default=None,
    help="With --claude-code-sync: the user of the sessions [default: as `episodes claude-code install` "
    "was told, else the login name].",
)
@click.pass_obj
def serve(
    obj: Context,
    concurrency: int | None,
    poll: float | None,
    maintenance: float | None,
    compress_cron: str | None,
    idle_close: float | None,
    shutdown_deadline: float | None,
    extractor: str | None,
    claude_code_sync: bool,
    claude_code_tenant: str | None,
    claude_code_user: str | None,
) -> None:
    """Run the scheduler: summarize on NOTIFY (and poll), maintenance, yearly compression.

    Every option falls back to its environment variable, then to its default.
    """
    from jobs.db import Database
    from jobs.extract import make_extractor
    from jobs.serve import ServeOptions, Server

    obj.database()  # the schema checked (one line and exit 1 if it is not current)
    db = Database.for_serve(obj.settings)  # tenant work as episodes_service (docs/operations.md, "Database roles")
    options = ServeOptions.from_settings(
        obj.settings,
        concurrency=concurrency,
        poll_seconds=poll,
        maintenance_seconds=maintenance,
        compress_cron=compress_cron,
        idle_close_seconds=idle_close,
        shutdown_deadline=shutdown_deadline,
    )
    if claude_code_sync:
        from jobs.claude_code.choices import serve_identity

        options = replace(options, claude_code=serve_identity(claude_code_tenant, claude_code_user, click.echo))
    chosen = make_extractor(obj.settings, extractor)
    try:
        counts = Server(db, chosen, options).run()
    finally:
        chosen.close()
        db.close()
    click.echo("stopped: " + " · ".join(f"{k} {v}" for k, v in sorted(counts.items())))


@click.command()
@click.option("--tenant", help="Only this tenant's dead letters.")
@click.pass_obj
def retry(obj: Context, tenant: str | None) -> None:
    """Requeue dead-lettered transcripts (after fixing the cause); `episodes run` picks them up."""
    from jobs.summarize import retry_dead

    n = retry_dead(obj.database(), tenant)
    click.echo(f"requeued {n} dead-lettered transcripts")
