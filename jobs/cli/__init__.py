"""The `episodes` command line: the group (jobs/cli/base.py) and its commands (jobs/cli/commands.py).

Every command has --help; errors are one line on stderr with exit status 1. A command's module is
imported only when that command runs or shows its --help, so `episodes --help` starts in a fraction
of a second. Command modules import the group's base and the jobs below them, never this package, so
the imports run one way: base <- commands <- demo.
"""

from __future__ import annotations

import logging
import os
import sys

from jobs.cli.base import Context, cli
from jobs.config import one_blas_thread

INTERRUPTED_EXIT = 130  # as jobs.cli.summarize.INTERRUPTED_EXIT (not imported here: --help stays fast)


def main() -> None:
    one_blas_thread()  # before anything loads numpy (jobs.config.BLAS_THREADS)
    try:
        cli(prog_name="episodes")
    except SystemExit as exc:
        if exc.code == INTERRUPTED_EXIT:
            # Ctrl-C: the claims are given back and the run recorded by now. Leave without the interpreter's
            # teardown, where ONNX Runtime's threads could abort the process (rc 134, issue 46 #16).
            logging.shutdown()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(INTERRUPTED_EXIT)
        raise


__all__ = ["Context", "cli", "main"]
