"""The `episodes` command line: the group (jobs/cli/base.py) with every command registered.

Every command has --help; errors are one line on stderr with exit status 1. Command modules import
the group's base and the jobs below them, never this package, so the imports run one way:
base <- commands <- demo <- here.
"""

from __future__ import annotations

from jobs.cli.api import api_command
from jobs.cli.base import Context, cli
from jobs.cli.claude_code import claude_code_group
from jobs.cli.compress import compress_command
from jobs.cli.demo import demo
from jobs.cli.ingest import ingest
from jobs.cli.keys import keys_group
from jobs.cli.lifecycle import (
    pin_command,
    prune_command,
    resummarize_command,
    unpin_command,
)
from jobs.cli.mcp import mcp_command
from jobs.cli.privacy import correct_command, export_command, forget_command, vacuum_command
from jobs.cli.recall import eval_group, recall_command
from jobs.cli.reembed import reembed_command
from jobs.cli.report import report_command
from jobs.cli.setup import init, status
from jobs.cli.summarize import retry, run, serve

for command in (init, ingest, run, serve, retry, status, demo, compress_command, recall_command, eval_group,
                report_command, forget_command, correct_command, export_command, resummarize_command,
                prune_command, pin_command, unpin_command, api_command, keys_group, mcp_command,
                reembed_command, claude_code_group, vacuum_command):
    cli.add_command(command)


def main() -> None:
    cli(prog_name="episodes")


__all__ = ["Context", "cli", "main"]
