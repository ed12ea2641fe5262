"""Back ends by name: extractors, compressors and embedders are found through entry points.

Each kind of back end is an entry-point group that any installed distribution may add to (as
simonw/llm's plugins do). episodes declares its own in pyproject.toml; a third party adds one
without editing ours::

    [project.entry-points."episodes.extractors"]
    mymodel = "my_package.extract:make"      # make(settings) -> an Extractor

What each group's callable takes and returns:

- ``episodes.extractors``: ``(settings) -> Extractor`` (:mod:`jobs.extract`)
- ``episodes.compressors``: ``(settings, embedder | None) -> Compressor`` (:mod:`jobs.compress.compressor`)
- ``episodes.embedders``: ``(option, threads, cache_dir, model_dir) -> Embedder`` where ``option``
  is what follows the colon of ``voyage:voyage-3`` or ``hashing:64`` (None without one)

An unknown name raises :class:`~jobs.errors.ConfigError` naming the installed ones. The groups are
read from the installed package metadata, so a change to pyproject.toml's entry points takes
effect after ``pip install -e .`` again.
"""

from __future__ import annotations

from functools import cache
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from jobs.errors import ConfigError

EXTRACTORS = "episodes.extractors"
COMPRESSORS = "episodes.compressors"
EMBEDDERS = "episodes.embedders"

__all__ = ["COMPRESSORS", "EMBEDDERS", "EXTRACTORS", "installed", "load", "refresh"]


@cache
def _group(group: str) -> dict[str, EntryPoint]:
    # The first distribution to declare a name wins: a third party cannot replace a built-in by
    # declaring the same name (importlib.metadata lists episodes' own entry points with the rest).
    found: dict[str, EntryPoint] = {}
    for point in sorted(entry_points(group=group), key=lambda p: getattr(p.dist, "name", None) != "episodes"):
        found.setdefault(point.name, point)
    return found


def installed(group: str) -> list[str]:
    """The names installed in ``group``, sorted."""
    return sorted(_group(group))


def load(group: str, name: str, what: str) -> Any:
    """The callable registered as ``name`` in ``group`` (``what`` names the kind in the error)."""
    point = _group(group).get(name)
    if point is None:
        names = installed(group)
        have = ", ".join(names) if names else "none (is episodes installed? pip install -e .)"
        raise ConfigError(
            f"unknown {what} {name!r}; installed: {have}. A back end is added by an entry point "
            f"in the {group!r} group (docs/extractors.md)."
        )
    try:
        return point.load()
    except ImportError as exc:
        raise ConfigError(
            f"{what} {name!r} ({point.value}) cannot be imported: {exc}. Install the package that "
            "provides it, or choose another."
        ) from exc


def refresh() -> None:
    """Forget the groups read so far (after installing a distribution in this process; tests)."""
    _group.cache_clear()
