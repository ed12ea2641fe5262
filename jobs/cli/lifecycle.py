"""`episodes resummarize`, `episodes prune --transcripts | --policy`, `episodes pin` and `episodes unpin`:
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
@click.option(
    "--prompt-version-below",
    "below",
    metavar="V",
    help="Only episodes made with a prompt version older than V (first used before V was; any "
    "version is older than one not used yet).",
)
@click.option("--extractor", metavar="NAME", default=None, help="Whose prompt version is current. " + EXTRACTOR_HELP)
@click.option("--dry-run", is_flag=True, help="Count the sessions and estimate tokens and cost; change nothing.")
@click.option(
    "--batch",
    is_flag=True,
    help="After requeueing, submit the queue through the Message Batches API at half price (as "
    "`episodes run --batch --no-wait`; a later `episodes run --batch` collects the results).",
)
@click.pass_obj
def resummarize_command(
    obj: Context,
    tenant: str | None,
    user: str | None,
    since: dt.datetime | None,
    until: dt.datetime | None,
    below: str | None,
    extractor: str | None,
    dry_run: bool,
    batch: bool,
) -> None:
    """Requeue chosen sessions for a new episode under the current prompt.

    The new episodes supersede the old ones like any re-summarisation; `serve` (or `episodes run`)
    picks the sessions up. Safe while `serve` runs; running it twice queues each session once.
    Sessions whose messages retention removed are skipped and counted.
    """
    from jobs.lifecycle.resummarize import Selection, current_prompt_version, plan_resummarize, resummarize

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
@click.option(
    "--transcripts", is_flag=True, help="Remove the message bodies of summarised transcripts older than the retention."
)
@click.option(
    "--policy",
    "policy_text",
    metavar="POLICY",
    help='Erase episodes by a pruning policy, e.g. "keep 30d; keep importance>=0.7; delete '
    'importance<0.5 after 90d" (grammar in docs/lifecycle.md). Pass "env" for EPISODES_PRUNE_POLICY.',
)
@click.option(
    "--older-than",
    type=Duration(),
    default=None,
    help="With --transcripts: retention to apply, e.g. 90d. [env EPISODES_TRANSCRIPT_RETENTION]",
)
@click.option("--tenant", help="Only this tenant's transcripts or episodes.")
@click.option("--dry-run", is_flag=True, help="Count what would be removed (per clause, for a policy); change nothing.")
@click.pass_obj
def prune_command(
    obj: Context,
    transcripts: bool,
    policy_text: str | None,
    older_than: float | None,
    tenant: str | None,
    dry_run: bool,
) -> None:
    """Prune old memory: transcript bodies (--transcripts) or episodes (--policy); one of the two.

    --transcripts keeps every episode: each transcript keeps its row, content hash and message count
    (re-ingesting the same content is still a no-op).

    --policy erases the episodes it selects like `episodes forget --episode` does (events, entities,
    what they resolved; super-summaries that included them are rebuilt); pinned episodes always
    survive. Works in small batches and records an erasure per user.
    """
    from jobs.errors import ConfigError

    if transcripts == (policy_text is not None):
        raise ConfigError("Choose what to prune: --transcripts or --policy POLICY (see episodes prune --help).")
    if policy_text is not None:
        _prune_policy(obj, policy_text, tenant, dry_run)
        return
    from jobs.lifecycle.retention import prune_transcripts

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


def _prune_policy(obj: Context, text: str, tenant: str | None, dry_run: bool) -> None:
    from jobs.errors import ConfigError
    from jobs.lifecycle.policy import apply_policy, plan_policy
    from jobs.prune_policy import parse_policy

    if text == "env":
        if obj.settings.prune_policy is None:
            raise ConfigError("EPISODES_PRUNE_POLICY is not set; pass the policy itself to --policy.")
        policy = obj.settings.prune_policy
    else:
        policy = parse_policy(text)
    db = obj.database()
    plan = plan_policy(db, policy, tenant=tenant)
    if dry_run:
        click.echo("\n".join(plan.lines()))
        return
    with tqdm(total=plan.deleted, desc="prune", unit="episode", file=sys.stderr, disable=None) as bar:
        report = apply_policy(db, policy, tenant=tenant, now=plan.at, progress=bar.update)
    click.echo(report.line())


@click.command("pin")
@click.option("--tenant", required=True, help="The episode's tenant.")
@click.option("--episode", "episode_id", type=int, required=True, help="The episode id (episodes.id).")
@click.pass_obj
def pin_command(obj: Context, tenant: str, episode_id: int) -> None:
    """Pin a session episode: no decay in recall, never compressed, never pruned."""
    from jobs.lifecycle.pins import pin

    click.echo(pin(obj.database(), tenant, episode_id).line())


@click.command("unpin")
@click.option("--tenant", required=True, help="The episode's tenant.")
@click.option("--episode", "episode_id", type=int, required=True, help="The episode id (episodes.id).")
@click.pass_obj
def unpin_command(obj: Context, tenant: str, episode_id: int) -> None:
    """Unpin an episode: it decays again and may be compressed by the next compress run."""
    from jobs.lifecycle.pins import unpin

    click.echo(unpin(obj.database(), tenant, episode_id).line())
