"""CLI commands `episodes forget`, `episodes vacuum`, `episodes correct` and `episodes export` (registered on the group in jobs/cli/__init__.py)."""

from __future__ import annotations

from pathlib import Path

import click

from jobs.cli.base import Context
from jobs.errors import CorrectionInvalid, UserNotFound
from jobs.wording import counted

EPISODE_ID = click.IntRange(1, 2**63 - 1)  # a bigint id: anything else is no episode, told before any query


@click.command("forget")
@click.option("--tenant", required=True, help="Tenant of the user or episode.")
@click.option("--user", "user_id", help="User to erase (everything held about them).")
@click.option(
    "--episode",
    "episode_id",
    type=EPISODE_ID,
    help='One session episode to erase instead (the user\'s "forget this"); its transcript is kept, '
    "never summarised again.",
)
@click.option(
    "--keep-transcripts",
    is_flag=True,
    help="With --user: keep the user's transcripts (marked done, never summarised again); erase everything else.",
)
@click.option("--dry-run", is_flag=True, help="Show what would be erased; change nothing.")
@click.option(
    "--vacuum",
    "vacuum",
    flag_value="plain",
    default="plain",
    help="After the erasure, VACUUM (ANALYZE) the tables it changed: index entries and pg_stats samples of "
    "the erased rows go, their space is freed (default).",
)
@click.option(
    "--vacuum-full",
    "vacuum",
    flag_value="full",
    help="Rewrite those tables instead (VACUUM FULL): no byte of the erased rows is left in the database's "
    "files; each table is locked while it is rewritten.",
)
@click.option(
    "--no-vacuum",
    "vacuum",
    flag_value="none",
    help="Leave it to a later `episodes vacuum` (when erasing many users in a row).",
)
@click.pass_obj
def forget_command(
    obj: Context,
    tenant: str,
    user_id: str | None,
    episode_id: int | None,
    keep_transcripts: bool,
    dry_run: bool,
    vacuum: str,
) -> None:
    """Erase a user, or one episode, in one transaction, and record it in `erasures` without the user id.

    --user removes the user's episodes (with events, entities, embeddings and any super-summary that
    included them), model-call records and transcripts (unless --keep-transcripts); a salted hash
    stands in for the user id in the audit. The erased sessions are refused from then on, whatever
    path brings them back; this machine's Claude Code sync ledger and hook state of them go too
    (Claude Code's own copies in ~/.claude/projects are named, not deleted). --episode removes one session episode, the earlier
    versions of its session and every super-summary that included it (rebuilt from the remaining
    sources), reopens what it resolved, and keeps its transcript marked never to be summarised again.
    Then the tables it changed are vacuumed and analysed (see --vacuum-full, --no-vacuum).
    """
    from jobs.rights.erase_episode import forget_episode
    from jobs.rights.forget import forget_user

    if (user_id is None) == (episode_id is None):
        raise click.UsageError("give exactly one of --user and --episode")
    if user_id is not None and not user_id.strip():
        raise click.BadParameter("give the user id (it is empty)", param_hint="--user")
    if user_id is None:
        if keep_transcripts:
            raise click.UsageError("--keep-transcripts goes with --user (an erased episode's transcript is kept)")
        click.echo(forget_episode(obj.database(), tenant, episode_id or 0, dry_run=dry_run).line())
    else:
        report = forget_user(obj.database(), tenant, user_id, keep_transcripts=keep_transcripts, dry_run=dry_run)
        if not report.found:
            click.echo(f"nothing held about user {user_id!r} in tenant {tenant!r}", err=True)
        if report.session_ids:
            _forget_on_this_machine(report.session_ids, dry_run=dry_run)
        click.echo(report.line())
    if not dry_run and vacuum != "none":
        _vacuum(obj, full=vacuum == "full")


def _forget_on_this_machine(session_ids: list[str], *, dry_run: bool) -> None:
    """The erased sessions' records of the Claude Code hooks and sync on this machine go too; Claude Code's
    own session files are named, not touched (jobs.claude_code.erase)."""
    from jobs.claude_code.erase import clear

    for line in clear(session_ids, dry_run=dry_run).lines(dry_run=dry_run):
        click.echo(line)


@click.command("vacuum")
@click.option(
    "--full",
    is_flag=True,
    help="VACUUM FULL: rewrite the tables, so no byte of erased rows is left in the database's files "
    "(each table is locked while it is rewritten).",
)
@click.pass_obj
def vacuum_command(obj: Context, full: bool) -> None:
    """VACUUM (ANALYZE) the tables erasures change, as their owner.

    `episodes forget` does it itself; run this after erasures made through the HTTP API, MCP or the
    memory page (their database role may not vacuum), or after `episodes forget --no-vacuum`. Until
    then the erased rows' index entries and pg_stats samples remain. See docs/privacy.md for what stays
    in WAL, replicas and backups.
    """
    _vacuum(obj, full=full)


def _vacuum(obj: Context, *, full: bool) -> None:
    from jobs.rights.vacuum import vacuum_after_erasure

    done = vacuum_after_erasure(obj.database(), full=full)
    click.echo(done.line(), err=bool(done.skipped))


@click.command("correct")
@click.option("--tenant", required=True, help="Tenant of the episode.")
@click.option("--episode", "episode_id", type=EPISODE_ID, required=True, help="The episode to correct.")
@click.option("--summary", help="The corrected summary (10-1,200 characters).")
@click.option(
    "--drop-event",
    "drop_events",
    type=EPISODE_ID,
    multiple=True,
    metavar="ID",
    help="Remove this event of the episode (repeatable).",
)
@click.option(
    "--event-text",
    "event_texts",
    type=(EPISODE_ID, str),
    multiple=True,
    metavar="ID TEXT",
    help="Replace the text of this event (repeatable).",
)
@click.option(
    "--event-status",
    "event_statuses",
    type=(EPISODE_ID, click.Choice(["open", "done"])),
    multiple=True,
    metavar="ID open|done",
    help="Mark an open question or commitment done, or open again (repeatable).",
)
@click.option("--actor", default="operator:cli", show_default=True, help="Who asked for it, kept in the audit.")
@click.option("--dry-run", is_flag=True, help="Check and show the correction; change nothing.")
@click.pass_obj
def correct_command(
    obj: Context,
    tenant: str,
    episode_id: int,
    summary: str | None,
    drop_events: tuple[int, ...],
    event_texts: tuple[tuple[int, str], ...],
    event_statuses: tuple[tuple[int, str], ...],
    actor: str,
    dry_run: bool,
) -> None:
    """Correct one episode: its summary, an event's text or status, or drop an event.

    The episode is re-embedded (recall follows the corrected words), every changed field is recorded
    in the audit table `episode_corrections` with its old and new value, and the correction is
    re-applied when the session is summarised again.
    """
    from jobs.rights.correct import correct_episode, correction_from

    if summary is None and not (drop_events or event_texts or event_statuses):
        raise click.UsageError("nothing to correct: give --summary, --drop-event, --event-text or --event-status")
    twice = sorted({i for i in drop_events if drop_events.count(i) > 1})
    if twice:
        raise click.BadParameter(f"event {twice[0]} is given twice", param_hint="--drop-event")
    events: dict[int, dict[str, str]] = {}
    for event_id, text in event_texts:
        events.setdefault(event_id, {})["text"] = text
    for event_id, status in event_statuses:
        events.setdefault(event_id, {})["status"] = status
    try:
        change = correction_from({"summary": summary, "drop_events": list(drop_events), "events": events})
        report = correct_episode(obj.database(), tenant, episode_id, change, actor=actor, dry_run=dry_run)
    except CorrectionInvalid as exc:
        raise CorrectionInvalid(exc.detail, field=_flag(exc.field, events)) from None
    click.echo(report.line())


def _flag(field: str, events: dict[int, dict[str, str]]) -> str:
    """The option of `episodes correct` that gave the part of the correction ``field`` names (the HTTP
    API's path to it: summary, drop_events[0], events.68.text); "" for the correction as a whole.
    ``events``: the event changes given, by id (which options named an event)."""
    parts = field.replace("[", ".").replace("]", "").split(".")
    if parts[0] == "summary":
        return "--summary"
    if parts[0] == "drop_events":
        return "--drop-event"
    if parts[0] == "events" and len(parts) > 1:
        given = parts[2:3] or sorted(events.get(int(parts[1]), {}) if parts[1].isdigit() else [])
        return "/".join(f"--event-{name}" for name in given or ["text", "status"]) + f" {parts[1]}"
    return ""


@click.command("export")
@click.option("--tenant", required=True, help="Tenant of the user.")
@click.option("--user", "user_id", required=True, help="User whose data is exported.")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the JSON here (mode 600) instead of to standard output.",
)
@click.option("--with-embeddings", is_flag=True, help="Include each episode's embedding vector.")
@click.pass_obj
def export_command(obj: Context, tenant: str, user_id: str, out: Path | None, with_embeddings: bool) -> None:
    """Print everything held about a user as JSON: transcripts, episodes with events and entities,
    super-summaries and model-call metadata ("what do you remember about me?")."""
    from jobs.rights.export import dumps, export_user, write_export

    document = export_user(obj.database(), tenant, user_id, with_embeddings=with_embeddings)
    counts = document["counts"]
    if not any(counts.values()):
        # As GET /v1/users/{user}/export answers 404: a mistyped id must not look like an empty memory.
        raise UserNotFound(
            f"Nothing is held about user {user_id!r} in tenant {tenant!r}; nothing was written. "
            "Check the tenant and the user id."
        )
    summary = (
        f"{counted(counts['transcripts'], 'transcript')}, {counted(counts['episodes'], 'episode')}, "
        f"{counted(counts['super_summaries'], 'super-summary')}, "
        f"{counted(counts['model_calls'], 'model call')}"
    )
    if out is None:
        click.echo(dumps(document), nl=False)
    else:
        write_export(document, out)
        click.echo(f"wrote {summary} to {out}", err=True)
