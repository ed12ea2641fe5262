"""The house's size gates, checked on every run: no Python module in jobs/, bench/ or tests/ is over 450 lines,
and no function is over a cyclomatic complexity of 15 (ruff's C901, configured in pyproject.toml).

Lines are counted as a reader meets them (the formatter's output, comments and docstrings included);
tests/test_architecture.py keeps its own measure of code characters beside this one.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 450
MAX_COMPLEXITY = 15


def line_counts() -> dict[str, int]:
    return {
        path.relative_to(ROOT).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for folder in ("jobs", "bench", "tests")
        for path in sorted((ROOT / folder).rglob("*.py"))
    }


def test_no_module_is_over_450_lines() -> None:
    over = {path: n for path, n in line_counts().items() if n > MAX_LINES}
    assert over == {}, (
        f"modules over {MAX_LINES} lines (path: lines): {over}; split each into modules named for what they hold"
    )


def test_complexity_gate_is_configured_without_exceptions() -> None:
    lint = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["ruff"]["lint"]
    assert "C901" in lint["select"]
    assert lint["mccabe"]["max-complexity"] == MAX_COMPLEXITY
    excepted = {path for path, rules in lint["per-file-ignores"].items() if "C901" in rules}
    assert excepted == set(), f"C901 ignored for {excepted}: split the functions instead"


def test_no_function_is_over_the_complexity_limit() -> None:
    result = subprocess.run(
        [
            *(sys.executable, "-m", "ruff", "check", "--no-cache", "--select", "C901"),
            *("--config", f"lint.mccabe.max-complexity={MAX_COMPLEXITY}", "jobs", "bench", "tests"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, (
        f"functions over complexity {MAX_COMPLEXITY}; split them:\n" + result.stdout[-6000:] + result.stderr[-2000:]
    )
