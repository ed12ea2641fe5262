"""CLI command `episodes compress` (registered on the group in jobs/cli/__init__.py)."""

from __future__ import annotations

import datetime as dt
import sys

import click

from jobs.cli.base import OFFLINE_NOTICE, Context
from jobs.wording import counted


@click.command("compress")
@click.option(
    "--older-than",
    default="12mo",
    show_default=True,
    help="Compress periods that ended more than this long ago: e.g. 12mo, 18mo, 2y, 8w, 400d.",
)
@click.option(
    "--period",
    type=click.Choice(["year", "quarter", "month"]),
    default="year",
    show_default=True,
    help="Calendar period (UTC) that one super-summary covers.",
)
@click.option("--tenant", help="Only this tenant.")
@click.option("--user", "user_id", help="Only this user.")
@click.option(
    "--dry-run",
    is_flag=True,
    help="List the periods that would be compressed, rebuilt or removed; change nothing, call no model.",
)
@click.option(
    "--extractor",
    metavar="NAME",
    default=None,
    help="Who compresses, as for `episodes run`: anthropic, claude-code, offline (the deterministic merge) "
    "or another installed compressor. auto (default): as EPISODES_EXTRACTOR resolves.",
)
@click.option(
    "--purge-embeddings",
    is_flag=True,
    help="Also drop the embedding vectors of compressed source episodes (~1.5 KB each at 384-d). "
    "They are out of recall anyway; the trade-off: analysts lose vector search over old "
    "sessions, and restoring them (e.g. after a super is removed) needs a re-embed. Text, "
    "events and entities are kept.",
)
@click.option(
    "--concurrency",
    type=click.IntRange(1, 64),
    default=4,
    show_default=True,
    help="Periods compressed at once (threads).",
)
@click.option("--now", type=click.DateTime(), help="Compress as of this time (UTC); default: now.")
@click.pass_obj
def compress_command(
    obj: Context,
    older_than: str,
    period: str,
    tenant: str | None,
    user_id: str | None,
    dry_run: bool,
    extractor: str | None,
    purge_embeddings: bool,
    concurrency: int,
    now: dt.datetime | None,
) -> None:
    """Merge old session episodes into one super-summary per user and period.

    A period qualifies once it ended more than --older-than ago (12mo on 2026-11-21: years up to
    2024). Each period with two or more session episodes becomes one super-summary that keeps the
    period's decisions, open questions and open commitments (each linked to its source event).
    The sources leave recall but stay in the database for analysts. Re-running changes nothing; an
    episode that arrives late rebuilds its period's super-summary. One run at a time.
    """
    from tqdm import tqdm

    from jobs.compress.run import make_compressor, run_compress

    db = obj.database()
    when = now.replace(tzinfo=dt.UTC) if now else None
    if dry_run:
        report = run_compress(
            db, older_than=older_than, period=period, tenant=tenant, user=user_id, dry_run=True, now=when
        )
        for group in report.planned:
            verb = {"created": "create", "rebuilt": "rebuild", "removed": "remove"}[group.action]
            click.echo(
                f"would {verb:<8}{group.tenant_id}  {group.user_id}  {group.period.label}  "
                f"({counted(len(group.source_ids), 'session')})"
            )
        click.echo(report.line())
        return
    compressor = make_compressor(obj.settings, extractor)
    if compressor.name == "offline":
        click.echo(OFFLINE_NOTICE.format(what="compressor"), err=True)
    try:
        with tqdm(desc="compress", unit="period", file=sys.stderr, disable=None) as bar:
            report = run_compress(
                db,
                older_than=older_than,
                period=period,
                tenant=tenant,
                user=user_id,
                compressor=compressor,
                now=when,
                purge_embeddings=purge_embeddings,
                concurrency=concurrency,
                progress=bar.update,
            )
    finally:
        compressor.close()
    for error in report.errors:
        click.echo(f"failed {error}", err=True)
    click.echo(report.line())
    if report.failed:
        click.echo(
            f"{report.failed} period(s) failed and were left untouched; run `episodes compress` again "
            "to complete them.",
            err=True,
        )
        sys.exit(1)
