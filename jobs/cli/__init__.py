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

INTERRUPTED_EXIT = 130  # as jobs.cli.summarize.INTERRUPTED_EXIT (not imported here: --help stays fast)

# numpy's OpenBLAS on one thread in every process of the command, `episodes api`'s workers included (they inherit
# the environment), unless the user set it: read when numpy loads, which no import above does. The products
# episodes computes are small (an opening message against a few hundred vectors), OpenBLAS runs each on every core,
# and its worker threads then spin waiting for the next one: a recall of a user with 10,000 episodes cost the
# process 130-134 ms of CPU, 31-32 ms of it in its own thread, and 31-36 ms in all on one thread (bench/recall.py,
# --blas-threads 0 against 1). Under load the spinning took the cores PostgreSQL and other requests needed. ONNX
# Runtime's threads are set apart (MiniLM's threads, Settings.embed_threads). A program that calls recall() owns
# its process and this setting (docs/recall.md).
BLAS_THREADS = "OPENBLAS_NUM_THREADS"


def main() -> None:
    os.environ.setdefault(BLAS_THREADS, "1")
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


__all__ = ["BLAS_THREADS", "Context", "cli", "main"]
