"""`episodes resummarize`, `episodes prune --transcripts`, `episodes pin` and `episodes unpin`:
memory over years (jobs/lifecycle)."""

from __future__ import annotations

import datetime as dt
import sys

import click
from tqdm import tqdm

from jobs.cli.base import EXTRACTOR_HELP, Context, Duration, utc


@click.command("resummarize")
@click.option("--tenant", help="Only this tenant's sessions.")
@click.option("--user", help="Only this user's sessions.")
@click.option("--since", type=click.DateTime(), help="Only sessions that ended at or after this time (UTC).")
@click.option("--until", type=click.DateTime(), help="Only sessions that ended before this time (UTC).")
@click.option("--prompt-version-below", "below", metavar="V",
              help="Only episodes made with a prompt version older than V (first used before V was; any "
                   "version is older than one not used yet).")
@click.option("--extractor", type=click.Choice(["auto", "anthropic", "offline"]), default=None,
              help="Whose prompt version is current. " + EXTRACTOR_HELP)
@click.option("--dry-run", is_flag=True, help="Count the sessions and estimate tokens and cost; change nothing.")
@click.option("--batch", is_flag=True,
              help="After requeueing, submit the queue through the Message Batches API at half price (as "
                   "`episodes run --batch --no-wait`; a later `episodes run --batch` collects the results).")
@click.pass_obj
def resummarize_command(obj: Context, tenant: str | None, user: str | None, since: dt.datetime | None,
                        until: dt.datetime | None, below: str | None, extractor: str | None, dry_run: bool,
                        batch: bool) -> None:
    """Requeue chosen sessions for a new episode under the current prompt.

    The new episodes supersede the old ones like any re-summarisation; `serve` (or `episodes run`)
    picks the sessions up. Safe while `serve` runs; running it twice queues each session once.
    Sessions whose messages retention removed are skipped and counted.
    """
    from jobs.lifecycle import (
        Selection,
        current_prompt_version,
        plan_resummarize,
        resummarize,
    )

    db = obj.database()
    selection = Selection(tenant=tenant, user=user, since=utc(since), until=utc(until), prompt_version_below=below)
    version = current_prompt_version(obj.settings, "anthropic" if batch else extractor)
    if dry_run:
        click.echo(plan_resummarize(db, selection, version).line() + " (dry run, nothing changed)")
        return
    with tqdm(desc="requeue", unit="session", file=sys.stderr, disable=None) as bar:
        plan = resummarize(db, selection, version, progress=bar.update)
    click.echo(plan.line())
    if batch and plan.requeued:
        from jobs.extract.claude import AnthropicExtractor
        from jobs.summarize import BatchRunner

        with AnthropicExtractor(obj.settings) as claude:
            click.echo(BatchRunner(db, claude).run(tenant=tenant, since=utc(since), wait=False).line())


@click.command("prune")
@click.option("--transcripts", is_flag=True, required=True,
              help="Remove the message bodies of summarised transcripts older than the retention (required: "
                   "the only kind of pruning so far).")
@click.option("--older-than", type=Duration(), default=None,
              help="Retention to apply, e.g. 90d. [env EPISODES_TRANSCRIPT_RETENTION]")
@click.option("--tenant", help="Only this tenant's transcripts.")
@click.option("--dry-run", is_flag=True, help="Count what would be removed; change nothing.")
@click.pass_obj
def prune_command(obj: Context, transcripts: bool, older_than: float | None, tenant: str | None,
                  dry_run: bool) -> None:
    """Remove the message bodies of old summarised transcripts, keeping every episode.

    Each transcript keeps its row, content hash and message count (re-ingesting the same content is
    still a no-op); episodes, events and evidence quotes are untouched. Works in small batches.
    """
    from jobs.errors import ConfigError
    from jobs.lifecycle import prune_transcripts

    retention = older_than or obj.settings.transcript_retention_seconds
    if not retention:
        raise ConfigError("No retention set: pass --older-than (e.g. 90d) or set EPISODES_TRANSCRIPT_RETENTION.")
    db = obj.database()
    if dry_run:
        click.echo(prune_transcripts(db, retention, tenant=tenant, dry_run=True).line())
        return
    total = prune_transcripts(db, retention, tenant=tenant, dry_run=True).transcripts
    with tqdm(total=total, desc="prune", unit="transcript", file=sys.stderr, disable=None) as bar:
        report = prune_transcripts(db, retention, tenant=tenant, progress=bar.update)
    click.echo(report.line())


@click.command("pin")
@click.option("--tenant", required=True, help="The episode's tenant.")
@click.option("--episode", "episode_id", type=int, required=True, help="The episode id (episodes.id).")
@click.pass_obj
def pin_command(obj: Context, tenant: str, episode_id: int) -> None:
    """Pin a session episode: no decay in recall, never compressed, never pruned."""
    from jobs.lifecycle import pin

    click.echo(pin(obj.database(), tenant, episode_id).line())


@click.command("unpin")
@click.option("--tenant", required=True, help="The episode's tenant.")
@click.option("--episode", "episode_id", type=int, required=True, help="The episode id (episodes.id).")
@click.pass_obj
def unpin_command(obj: Context, tenant: str, episode_id: int) -> None:
    """Unpin an episode: it decays again and may be compressed by the next compress run."""
    from jobs.lifecycle import unpin

    click.echo(unpin(obj.database(), tenant, episode_id).line())
