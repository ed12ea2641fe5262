"""What `pip install .` (not only -e) ships: every package of jobs/ and the files beside the code."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_under_jobs_is_in_the_distribution() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = {".".join(init.parent.relative_to(ROOT).parts) for init in (ROOT / "jobs").rglob("__init__.py")
             if "__pycache__" not in init.parts}
    assert found - listed == set(), "add these packages to [tool.setuptools] packages in pyproject.toml"
    for package, folder in config["package-dir"].items():
        if package != "jobs":
            assert (ROOT / folder).is_dir() and package in listed
