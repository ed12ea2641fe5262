"""The house's rules, checked on every run: imports run only downwards and never in a circle
(import-linter, contracts in pyproject.toml), the type checker finds nothing, modules stay small,
and nothing outside jobs/config.py reads the environment."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
JOBS = ROOT / "jobs"
MAX_LINES = 450


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed; install the test extra: pip install -e '.[test]'")
    return found


def test_imports_follow_the_layers_and_form_no_cycle() -> None:
    result = subprocess.run([_tool("lint-imports"), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "2 kept, 0 broken" in result.stdout


def test_type_checker_finds_no_error() -> None:
    result = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "--config-file",
                             str(ROOT / "pyproject.toml")], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert "Success: no issues found" in result.stdout


def test_no_module_is_over_the_size_limit() -> None:
    sizes = {str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines()) for p in JOBS.rglob("*.py")}
    assert {path: n for path, n in sizes.items() if n > MAX_LINES} == {}


def test_only_the_settings_read_the_environment() -> None:
    reads = re.compile(r"os\.environ|os\.getenv|getenv\(|envvar=")
    offenders = [f"{p.relative_to(ROOT)}:{n}" for p in JOBS.rglob("*.py") if p.name != "config.py"
                 for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if reads.search(line)]
    assert offenders == []


def test_no_type_ignore_and_no_importorskip_of_our_own_modules() -> None:
    ignores = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}" for p in JOBS.rglob("*.py")
               for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if "type: ignore" in line]
    assert ignores == []
    skips = [f"{p.name}:{n}" for p in (ROOT / "tests").glob("*.py")
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r"importorskip\(\s*[\"']jobs", line)]
    assert skips == []
