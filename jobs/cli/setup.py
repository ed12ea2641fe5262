"""`episodes init` and `episodes status`: create or upgrade the schema; see where things stand."""

from __future__ import annotations

import click

from jobs.cli.base import Context

# The jobs behind the commands are imported when they run, so `episodes init --help` starts at once
# (jobs/cli/commands.py).


@click.command()
@click.option(
    "--distributed",
    is_flag=True,
    help="Distribute the schema on a Citus cluster (sharded by tenant). Done anyway when the database "
    "has the citus extension; with this flag a database without it is an error.",
)
@click.option(
    "--shard-count",
    type=click.IntRange(1, 4096),
    default=None,
    help="Shards per distributed table on a first distribution (default: citus.shard_count, 32).",
)
@click.pass_obj
def init(obj: Context, distributed: bool, shard_count: int | None) -> None:
    """Create the schema, or upgrade it to this version (safe to run again).

    On a Citus coordinator it also distributes the tables by tenant, in place (docs/citus.md)."""
    from jobs import migrate
    from jobs.citus import cluster
    from jobs.embeddings import embedder_for

    db = obj.database(require_schema=False)
    embedder = embedder_for(obj.settings)
    with db.connect() as conn:
        applied = migrate.migrate(conn, embedding_dim=embedder.dim, embedder=embedder.name)
        if (
            obj.settings.embedded
        ):  # the API and MCP server log in as episodes_service (docs/operations.md, "Database roles")
            migrate.allow_service_login(conn)
        spread = cluster.distribute(conn, shard_count=shard_count) if distributed or cluster.has_citus(conn) else []
    if applied:
        names = ", ".join(f"{m.version:04d}_{m.name}" for m in applied)
        click.echo(f"Initialised {db.location}: applied {names}.")
    else:
        click.echo(
            f"Schema already at version {migrate.code_version()} in {db.location}: no migration to apply; "
            "the analyst views re-created from sql/views."
        )
    if spread:
        click.echo(f"Distributed on the Citus cluster: {', '.join(spread)}.")


@click.command()
@click.pass_obj
def status(obj: Context) -> None:
    """Show where the data lives, the schema version, the queue and the last job runs."""
    from jobs.cli.status_view import render_status

    click.echo(render_status(obj.database(require_schema=False)))
