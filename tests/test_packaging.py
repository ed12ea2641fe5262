"""What `pip install .` (not only -e) ships: every package of jobs/ and the files beside the code."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_under_jobs_is_in_the_distribution() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "jobs").rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    assert found - listed == set(), "add these packages to [tool.setuptools] packages in pyproject.toml"
    for package, folder in config["package-dir"].items():
        if package != "jobs":
            assert (ROOT / folder).is_dir() and package in listed


def test_every_file_beside_the_code_that_the_code_opens_is_shipped() -> None:
    """Non-Python files under jobs/ that the code opens at run time (e.g. the remote SessionStart hook's
    jobs/claude_code/session_start.sh) match a package-data pattern, or `pip install .` leaves them out."""
    import fnmatch

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    data = config.get("package-data", {})
    missing = []
    for path in (ROOT / "jobs").rglob("*"):
        if not path.is_file() or "__pycache__" in path.parts or path.suffix in {".py", ".pyc", ".typed"}:
            continue
        package = ".".join(path.parent.relative_to(ROOT).parts)
        if not any(fnmatch.fnmatch(path.name, pattern) for pattern in data.get(package, [])):
            missing.append(str(path.relative_to(ROOT)))
    assert missing == [], "add these to [tool.setuptools.package-data] in pyproject.toml"
