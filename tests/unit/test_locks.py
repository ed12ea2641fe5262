"""The hashed locks install on a machine with nothing on it, with the pip it ships (23.2 on Python 3.11).

`pip install --require-hashes` reads a locked package's requirement of another with extras
(`pytest-cov` needs `coverage[toml]`) as a requirement of its own, and refuses it unless the lock pins
that package *with those extras* (`coverage[toml]==...`): a lock that pins plain `coverage==...` installs
only where coverage is already installed. `uv pip compile` writes the plain pin, so each lock is checked
here against the metadata of the installed packages it names.
"""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

LOCKS = Path(__file__).resolve().parents[2] / "requirements"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[([^\]]+)\])?==([^\s;\\]+)", re.MULTILINE)


def pins(lock: Path) -> dict[str, tuple[set[str], str]]:
    """Each locked package's canonical name -> (the extras its pin names, its version)."""
    return {
        canonicalize_name(name): ({e.strip() for e in (extras or "").split(",") if e.strip()}, version)
        for name, extras, version in PIN.findall(lock.read_text(encoding="utf-8"))
    }


def extras_asked(locked: dict[str, tuple[set[str], str]]) -> dict[str, set[str]]:
    """For each locked package, the extras other locked packages ask of it (markers evaluated here, with no
    extra of their own), read from the installed distributions' metadata."""
    asked: dict[str, set[str]] = {}
    for name in locked:
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for line in requires:
            req = Requirement(line)
            if req.extras and canonicalize_name(req.name) in locked:
                if req.marker is None or req.marker.evaluate({"extra": ""}):
                    asked.setdefault(canonicalize_name(req.name), set()).update(req.extras)
    return asked


@pytest.mark.parametrize("lock", ["runtime.txt", "test.txt", "docs.txt"])
def test_every_extra_a_locked_package_asks_for_is_pinned_with_it(lock: str) -> None:
    locked = pins(LOCKS / lock)
    assert len(locked) > 10
    missing = {
        name: sorted(extras - locked[name][0])
        for name, extras in extras_asked(locked).items()
        if not extras <= locked[name][0]
    }
    assert not missing, (
        f"requirements/{lock}: pin these with their extras (e.g. coverage[toml]==7.17.5), or pip 23.2's "
        f"--require-hashes refuses the lock on a fresh machine: {missing}"
    )


def test_the_pin_pattern_reads_extras() -> None:
    """The check above can fail: a plain pin of a package asked for with extras is reported."""
    text = "coverage==7.17.5 \\\n    --hash=sha256:00\npytest-cov[all]==7.1.0 \\\n"
    found = {canonicalize_name(n): ({e for e in (x or "").split(",") if e}, v) for n, x, v in PIN.findall(text)}
    assert found == {"coverage": (set(), "7.17.5"), "pytest-cov": ({"all"}, "7.1.0")}
