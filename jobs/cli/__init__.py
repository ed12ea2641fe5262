"""The `episodes` command line: the group (jobs/cli/base.py) and its commands (jobs/cli/commands.py).

Every command has --help; errors are one line on stderr with exit status 1. A command's module is
imported only when that command runs or shows its --help, so `episodes --help` starts in a fraction
of a second. Command modules import the group's base and the jobs below them, never this package, so
the imports run one way: base <- commands <- demo.
"""

from __future__ import annotations

from jobs.cli.base import Context, cli


def main() -> None:
    cli(prog_name="episodes")


__all__ = ["Context", "cli", "main"]
