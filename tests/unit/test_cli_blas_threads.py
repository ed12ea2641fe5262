"""`episodes` runs numpy's OpenBLAS on one thread (jobs.config: BLAS_THREADS, set by jobs.cli.main): its worker threads spin after each of
recall's small products and took the cores PostgreSQL needed (bench/recall.py prints the CPU of both settings).
OpenBLAS reads the setting when numpy loads, so the command sets it before any import loads numpy; a user's own
setting stands. Each case runs the real command's entry point in a fresh interpreter."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PROBE = """
import os, sys
import jobs.cli
loaded_first = "numpy" in sys.modules
sys.argv = ["episodes", "--help"]
try:
    jobs.cli.main()
except SystemExit as exc:
    assert exc.code == 0, exc.code
print(loaded_first, os.environ.get("OPENBLAS_NUM_THREADS"))
"""


def _probe(env: dict[str, str]) -> str:
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_the_command_sets_one_blas_thread_before_numpy_loads() -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    assert _probe(env) == "False 1"


@pytest.mark.parametrize("own", ["4", "0"])
def test_a_users_own_setting_stands(own: str) -> None:
    assert _probe({**os.environ, "OPENBLAS_NUM_THREADS": own}) == f"False {own}"
