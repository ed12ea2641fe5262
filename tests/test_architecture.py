"""The house's rules, checked on every run: imports run only downwards and never in a circle
(import-linter, contracts in pyproject.toml), the type checker (strict, over jobs/ and tests/) finds
nothing, modules stay small, and nothing outside jobs/config.py reads the environment."""

from __future__ import annotations

import ast
import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
JOBS = ROOT / "jobs"
# A module's size in characters of code, whitespace aside, so that the formatter's line breaks do not count:
# 450 dense lines of ~40 such characters each, the limit in lines before the code was formatted.
MAX_CODE_CHARS = 18_000
MYPY_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "episodes" / "mypy"


def test_imports_follow_the_layers_and_form_no_cycle() -> None:
    run = (
        "import sys; from importlinter.cli import lint_imports_command; "
        "sys.argv = ['lint-imports', '--config', 'pyproject.toml', '--no-cache']; lint_imports_command()"
    )
    result = subprocess.run([sys.executable, "-c", run], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "2 kept, 0 broken" in result.stdout


def test_linter_and_formatter_find_nothing() -> None:
    """ruff with the configuration in pyproject.toml: its lint rules, and the code as its formatter writes it."""
    for command in (["check", "--no-cache", "."], ["format", "--check", "--no-cache", "."]):
        result = subprocess.run([sys.executable, "-m", "ruff", *command], cwd=ROOT, capture_output=True, text=True)
        assert result.returncode == 0, f"ruff {' '.join(command)}:\n" + result.stdout[-6000:] + result.stderr[-2000:]


@pytest.mark.slow  # mypy --strict over jobs/ and tests/: ~40 s of CPU with no cache, ~2 s with one
def test_type_checker_finds_no_error() -> None:
    """mypy in strict mode, with [tool.mypy] of pyproject.toml: jobs/ and tests/ (the files it names).

    Incremental, with its cache outside the tree (MYPY_CACHE, shared by every clone on the machine): two thirds of
    the work is the installed packages' types (anthropic, openai, ...), which the cache keeps, and CI clones afresh.
    mypy still checks every file: it re-reads each whose hash changed and what depends on its interface."""
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(MYPY_CACHE), "--config-file", str(ROOT / "pyproject.toml")],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert "Success: no issues found" in result.stdout


def test_no_module_is_over_the_size_limit() -> None:
    sizes = {
        str(p.relative_to(ROOT)): len(re.sub(r"\s", "", p.read_text(encoding="utf-8"))) for p in JOBS.rglob("*.py")
    }
    assert {path: n for path, n in sizes.items() if n > MAX_CODE_CHARS} == {}


def test_only_the_settings_read_the_environment() -> None:
    reads = re.compile(r"os\.environ|os\.getenv|getenv\(|envvar=")
    offenders = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in JOBS.rglob("*.py")
        if p.name != "config.py"
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if reads.search(line)
    ]
    assert offenders == []


def test_no_type_ignore_and_no_importorskip_of_our_own_modules() -> None:
    ignores = [
        f"{p.relative_to(ROOT)}:{n}: {line.strip()}"
        for p in JOBS.rglob("*.py")
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if "type: ignore" in line
    ]
    assert ignores == []
    skips = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in (ROOT / "tests").rglob("*.py")  # tests/unit and tests/support too
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"importorskip\(\s*[\"']jobs", line)
    ]
    assert skips == []


def test_every_lazy_package_lists_its_public_names_literally() -> None:
    """A package that serves its names through jobs.lazy names them in a literal ``__all__``: under mypy's
    strict mode that list is what exports the names of its ``if TYPE_CHECKING:`` block (``sorted(_WHERE)``
    exported none), and every name it serves lazily is in it and resolves."""
    lazy = [p for p in JOBS.rglob("__init__.py") if "lazy_names(" in p.read_text(encoding="utf-8")]
    assert lazy, "no package uses jobs.lazy any more: drop this test"
    for path in lazy:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        listed = [
            node.value
            for node in tree.body
            if isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["__all__"]
        ]
        assert len(listed) == 1 and isinstance(listed[0], ast.List), f"{path}: __all__ is not one literal list"
        names = ast.literal_eval(listed[0])
        package = importlib.import_module(".".join(path.relative_to(ROOT).parent.parts))
        assert set(package._WHERE) <= set(names), f"{path}: served lazily but not in __all__"
        assert all(getattr(package, name) is not None for name in names)
