"""``python tests/support/crash_worker.py POINT|- ARGS...``: the ``episodes ARGS...`` command in a process that
kills itself (kill -9) at the crash point POINT (jobs.faults; ``-``: none), with test-sized settings:
no SDK retries and a 5-second lease, so a killed worker's claim expires within a test.

The crash tests (tests/test_serve.py) start it in place of ``python -m jobs.cli``: crash points and
these sizes are the tests' business, so no production setting or variable carries them.
"""

from __future__ import annotations

import sys

from jobs import config, faults

TEST_SIZES = {"max_retries": 0, "lease_seconds": 5}


def main() -> None:
    point, *args = sys.argv[1:]
    if point != "-":
        faults.arm(point)
    production_load = config.load
    config.load = lambda: production_load().with_(**TEST_SIZES)  # what every command reads its settings with
    from jobs.cli import main as episodes

    sys.argv = ["episodes", *args]
    episodes()


if __name__ == "__main__":
    main()
