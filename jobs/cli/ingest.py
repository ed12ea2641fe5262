"""`episodes ingest`: load transcripts from files."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from jobs.cli.base import Context
from jobs.wording import counted


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["auto", "locomo", "claude-code"]),
    default="auto",
    show_default=True,
    help="auto: told from each file's first lines: a Claude Code session file, or our JSON / JSONL "
    "transcript format (messages in our plain, the Anthropic or the OpenAI shape; JSONL, or one "
    "JSON document however laid out); locomo: LoCoMo conversation files; claude-code: Claude "
    "Code session files (~/.claude/projects/<project>/*.jsonl), forced.",
)
@click.option("--tenant", help="Tenant for records that name none (LoCoMo default: locomo; Claude Code: local).")
@click.option("--user", "user", help="Claude Code only: the user of the sessions (default: your login name).")
@click.pass_obj
def ingest(obj: Context, paths: tuple[Path, ...], fmt: str, tenant: str | None, user: str | None) -> None:
    """Load transcripts from JSON / JSONL files or directories (recursively).

    Bad records (or, for Claude Code files, bad lines) are reported as FILE:LINE: REASON and
    skipped; the others load. The exit status is 1 when anything was rejected.
    """
    from tqdm import tqdm  # imported here, as the ingest job: `episodes ingest --help` starts at once

    from jobs.ingest import ingest as run_ingest

    db = obj.database()
    started = time.perf_counter()
    with tqdm(desc="ingest", unit="rec", file=sys.stderr, disable=None) as bar:
        report = run_ingest(db, list(paths), fmt=fmt, tenant_id=tenant, user_id=user, progress=bar.update)
    elapsed = time.perf_counter() - started
    for rejection in report.rejected:
        click.echo(f"rejected {rejection}", err=True)
    click.echo(
        f"ingested {counted(report.loaded, 'transcript')} ({report.inserted} new, {report.updated} changed, "
        f"{report.unchanged} unchanged), rejected {len(report.rejected)} in {elapsed:.1f}s"
    )
    if report.rejected:
        sys.exit(1)
