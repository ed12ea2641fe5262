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

import json
import logging
from functools import cache
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any
from urllib.parse import urlparse
from urllib.request import url2pathname

from jobs.errors import ConfigError

log = logging.getLogger(__name__)

EXTRACTORS = "episodes.extractors"
COMPRESSORS = "episodes.compressors"
EMBEDDERS = "episodes.embedders"

__all__ = ["COMPRESSORS", "EMBEDDERS", "EXTRACTORS", "installed", "load", "refresh"]


@cache
def _group(group: str) -> dict[str, EntryPoint]:
    # A built-in name is one that this package's own distribution declares (found by where its files
    # are, not by the name in its metadata: a plugin may say ``Name: episodes`` too). A third party
    # that declares a built-in name is refused with a warning; among third parties the first wins.
    points = list(entry_points(group=group))
    found: dict[str, EntryPoint] = {p.name: p for p in points if _ours(p)}
    for point in points:
        if point.name not in found:
            found[point.name] = point
        elif found[point.name] is not point and not _ours(point):
            _refused(group, point, found[point.name])
    return found


_PACKAGE = Path(__file__).resolve().parent  # jobs/


def _ours(point: EntryPoint) -> bool:
    """Declared by the installed ``episodes`` distribution whose files are this package, and pointing into it."""
    dist = point.dist
    if dist is None or dist.metadata["Name"] != "episodes" or not point.module.startswith("jobs."):
        return False
    roots = [Path(str(dist.locate_file("")))]
    try:  # an editable install (pip install -e .): the project folder is in direct_url.json
        url = json.loads(dist.read_text("direct_url.json") or "{}").get("url", "")
    except (json.JSONDecodeError, AttributeError):
        url = ""
    if url.startswith("file://"):
        roots.append(Path(url2pathname(urlparse(url).path)))
    return any(_same(root / "jobs", _PACKAGE) for root in roots)


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b
    except OSError:
        return False


def _refused(group: str, point: EntryPoint, kept: EntryPoint) -> None:
    dist = point.dist
    who = f"{dist.metadata['Name']} at {dist.locate_file('')}" if dist is not None else "an unknown distribution"
    log.warning(
        "%s back end %r from %s (%s) is refused: the name is taken by %s; give the plugin a name of its own",
        group,
        point.name,
        who,
        point.value,
        "episodes itself" if _ours(kept) else kept.value,
        extra={"action": "plugin_refused", "group": group, "back_end": point.name},
    )


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
