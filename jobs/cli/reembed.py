"""`episodes reembed`: switch the database to another embedder without stopping recall (jobs.lifecycle.reembed)."""

from __future__ import annotations

import sys

import click
from tqdm import tqdm

from jobs.cli.base import Context


@click.command("reembed")
@click.option(
    "--embedder",
    "name",
    metavar="NAME",
    help="The embedder to switch to: minilm, minilm-fp32, voyage[:model], hashing[:dim] (tests and "
    "offline use). The current one re-embeds everything under today's episode text.",
)
@click.option(
    "--batch-size",
    type=click.IntRange(1, 10_000),
    default=256,
    show_default=True,
    help="Episodes per batch (one short transaction each; a kill loses at most one batch).",
)
@click.option("--dry-run", is_flag=True, help="Say what would be re-embedded and with what; change nothing.")
@click.option("--abort", is_flag=True, help="Drop the re-embed in progress and its new vectors; nothing switches.")
@click.pass_obj
def reembed_command(obj: Context, name: str | None, batch_size: int, dry_run: bool, abort: bool) -> None:
    """Re-embed every episode with another embedder, then switch to it in one transaction.

    The new vectors are built beside the old ones while recall keeps answering from the old ones;
    resumable after a crash at any point (run it again with the same --embedder). At the switch the
    episodes written meanwhile are caught up, the old vectors are dropped, and recall follows the new
    embedder. Restart `serve` and `api` processes with EPISODES_EMBEDDER=NAME afterwards: until
    then `serve` stops itself rather than store vectors of the old embedder.
    """
    from jobs.db import one
    from jobs.embeddings import get_embedder
    from jobs.embeddings.recorded import recorded_embedder
    from jobs.errors import ConfigError
    from jobs.lifecycle.reembed import abort_reembed, reembed, reembed_progress
    from jobs.sql import query

    db = obj.database()
    if abort:
        dropped = abort_reembed(db)
        click.echo(f"dropped: {dropped.line()}" if dropped else "no re-embed in progress; nothing changed")
        return
    if not name:
        raise ConfigError("Pass --embedder NAME (e.g. --embedder minilm), or --abort.")
    s = obj.settings
    embedder = get_embedder(name, threads=s.embed_threads, cache_dir=s.cache_dir, model_dir=s.model_dir)
    if dry_run:
        with db.admin() as conn:
            current, progress = recorded_embedder(conn), reembed_progress(conn)
            total = one(conn.execute(query("reembed_count")))["n"]
        click.echo(
            f"would re-embed {total:,} episodes from {current.name} ({current.dim}-d) "
            f"to {name} ({embedder.dim}-d)"
            + (f"; in progress: {progress.line()}" if progress else "")
            + " (dry run, nothing changed)"
        )
        return
    with tqdm(desc="reembed", unit="episode", file=sys.stderr, disable=None) as bar:

        def on_total(total: int, done: int) -> None:
            bar.total, bar.n = total, done
            bar.refresh()

        report = reembed(db, embedder, name, batch_size=batch_size, on_total=on_total, progress=bar.update)
    click.echo(report.line())
