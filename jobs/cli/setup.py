"""`episodes init` and `episodes status`: create or upgrade the schema; see where things stand."""

from __future__ import annotations

import click

from jobs import migrate
from jobs.cli.base import Context
from jobs.cli.status_view import render_status
from jobs.embeddings import embedder_for


@click.command()
@click.pass_obj
def init(obj: Context) -> None:
    """Create the schema, or upgrade it to this version (safe to run again)."""
    db = obj.database(require_schema=False)
    embedder = embedder_for(obj.settings)
    with db.connect() as conn:
        applied = migrate.migrate(conn, embedding_dim=embedder.dim, embedder=embedder.name)
    if applied:
        names = ", ".join(f"{m.version:04d}_{m.name}" for m in applied)
        click.echo(f"Initialised {db.location}: applied {names}.")
    else:
        click.echo(f"Schema already at version {migrate.code_version()} in {db.location}; nothing to do.")


@click.command()
@click.pass_obj
def status(obj: Context) -> None:
    """Show where the data lives, the schema version, the queue and the last job runs."""
    click.echo(render_status(obj.database(require_schema=False)))
