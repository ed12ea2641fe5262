"""CLI command `episodes report` (registered on the group in jobs/cli/__init__.py)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import click

from jobs.cli.base import Context


@click.command("report")
@click.option(
    "--tenant",
    metavar="TENANT",
    help="Only this tenant (read as episodes_analyst). Default: every tenant, read as episodes_operator.",
)
@click.option(
    "--since",
    metavar="DATE",
    type=click.DateTime(formats=["%Y-%m-%d"]),
    help="Only sessions, events, calls and failures on or after this day (UTC), e.g. 2025-01-01.",
)
@click.option(
    "--out",
    "out_dir",
    metavar="DIR",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory to write the HTML file into (created if missing).",
)
@click.pass_obj
def report_command(obj: Context, tenant: str | None, since: dt.datetime | None, out_dir: Path) -> None:
    """Write an HTML report of episodes, events, costs and failures.

    One self-contained file (inline CSS and SVG charts, no scripts or external requests): episodes
    per week, key events over time, top topics and entities, open-question aging, overdue
    commitments, the decision log, tokens and cost per day, and failures and dead letters. The data
    is read only through the analyst views, so it shows what an analyst of that scope may see.
    """
    from jobs.report import write_report

    path = write_report(obj.database(), out_dir, tenant=tenant, since=since.date() if since else None)
    click.echo(f"wrote {path}")
