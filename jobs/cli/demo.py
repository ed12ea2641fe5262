"""`episodes demo`: the whole system once, on the bundled example transcripts."""

from __future__ import annotations

from pathlib import Path

import click

from jobs.cli.base import Context
from jobs.cli.compress import compress_command
from jobs.cli.recall import recall_command
from jobs.cli.setup import init, status
from jobs.cli.summarize import run
from jobs.ingest import ingest as run_ingest
from jobs.resources import examples_dir


@click.command()
@click.pass_context
def demo(ctx: click.Context) -> None:
    """Initialise the database, load the bundled example transcripts, summarise them, compress the old
    year, show the status and what an agent would recall at its next session."""
    ctx.invoke(init)
    paths = sorted(Path(str(p)) for p in examples_dir().iterdir() if p.name.endswith(".jsonl"))
    obj: Context = ctx.obj
    report = run_ingest(obj.database(), paths)
    click.echo(
        f"Loaded example transcripts: {report.inserted} new, {report.updated} changed, "
        f"{report.unchanged} unchanged, {len(report.rejected)} rejected."
    )
    ctx.invoke(run, limit=None, tenant=None, since=None, extractor=None, concurrency=4, batch=False)
    click.echo("Compressing years that ended more than 12 months ago into super-summaries:")
    ctx.invoke(
        compress_command,
        older_than="12mo",
        period="year",
        tenant=None,
        user_id=None,
        dry_run=False,
        extractor=None,
        purge_embeddings=False,
        concurrency=2,
        now=None,
    )
    ctx.invoke(status)
    question = "Can we look at our Snowflake costs again before the renewal?"
    click.echo(f"\nWhat an agent would load for acme/u-maria opening with {question!r}:\n")
    ctx.invoke(
        recall_command,
        opening_message=question,
        tenant="acme",
        user_id="u-maria",
        purpose=None,
        budget=800,
        now=None,
        as_json=False,
    )
