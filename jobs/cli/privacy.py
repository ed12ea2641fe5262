"""CLI commands `episodes forget` and `episodes export` (registered on the group in jobs/cli/__init__.py)."""

from __future__ import annotations

from pathlib import Path

import click

from jobs.cli.base import Context


@click.command("forget")
@click.option("--tenant", required=True, help="Tenant of the user.")
@click.option("--user", "user_id", required=True, help="User to erase.")
@click.option("--keep-transcripts", is_flag=True,
              help="Keep the user's transcripts (marked done, never summarised again); erase everything else.")
@click.option("--dry-run", is_flag=True, help="Show what would be erased; change nothing.")
@click.pass_obj
def forget_command(obj: Context, tenant: str, user_id: str, keep_transcripts: bool, dry_run: bool) -> None:
    """Erase everything held about a user in one tenant, in one transaction.

    Removes the user's episodes (with events, entities, embeddings and any super-summary that
    included them), model-call records and transcripts (unless --keep-transcripts), and records
    the erasure in the audit table `erasures` without the user id (a salted hash stands in).
    """
    from jobs.privacy import forget_user

    report = forget_user(obj.database(), tenant, user_id, keep_transcripts=keep_transcripts, dry_run=dry_run)
    if not report.found:
        click.echo(f"nothing held about user {user_id!r} in tenant {tenant!r}", err=True)
    click.echo(report.line())


@click.command("export")
@click.option("--tenant", required=True, help="Tenant of the user.")
@click.option("--user", "user_id", required=True, help="User whose data is exported.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the JSON here (mode 600) instead of to standard output.")
@click.option("--with-embeddings", is_flag=True, help="Include each episode's embedding vector.")
@click.pass_obj
def export_command(obj: Context, tenant: str, user_id: str, out: Path | None, with_embeddings: bool) -> None:
    """Print everything held about a user as JSON: transcripts, episodes with events and entities,
    super-summaries and model-call metadata ("what do you remember about me?")."""
    from jobs.privacy import dumps, export_user, write_export

    document = export_user(obj.database(), tenant, user_id, with_embeddings=with_embeddings)
    counts = document["counts"]
    summary = (f"{counts['transcripts']} transcripts, {counts['episodes']} episodes, "
               f"{counts['super_summaries']} super-summaries, {counts['model_calls']} model calls")
    if not any(counts.values()):
        click.echo(f"nothing held about user {user_id!r} in tenant {tenant!r}", err=True)
    if out is None:
        click.echo(dumps(document), nl=False)
    else:
        write_export(document, out)
        click.echo(f"wrote {summary} to {out}", err=True)
