"""The layout of tests/: helpers live in tests/support/, and no test module imports another (a test module's
fixtures and helpers that others need go to tests/conftest.py or tests/support/)."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            names.add(node.module)
    return names


def test_no_test_module_imports_another() -> None:
    found = [
        f"{path.relative_to(TESTS)} imports {name}"
        for path in sorted(TESTS.rglob("*.py"))
        for name in sorted(_imported_modules(path))
        if name.split(".")[-1].startswith("test_")
    ]
    assert found == [], "move what they share into tests/support/ (or a fixture into tests/conftest.py)"


def test_the_only_module_beside_the_tests_is_conftest() -> None:
    beside = sorted(p.name for p in TESTS.glob("*.py") if not p.name.startswith("test_"))
    assert beside == ["conftest.py"], f"helpers go in tests/support/: {beside}"
