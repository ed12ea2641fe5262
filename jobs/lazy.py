"""A package's public names imported at their first use (PEP 562).

A package whose ``__init__`` imported all of its modules made every caller of one of them pay for
the rest (the Claude Code SessionStart hook for all of recall, `episodes status` for every lifecycle
job). Such a package lists its names and their modules and gets its ``__getattr__`` and ``__dir__``
from :func:`lazy_names`; its type checker view stays in an ``if TYPE_CHECKING:`` import block.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any


def lazy_names(
    namespace: MutableMapping[str, Any], where: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for the package whose ``globals()`` is ``namespace``: each name of
    ``where`` (name -> module, absolute or relative to the package) is imported from its module when it
    is first asked for, then kept in the package like any other name."""
    package = str(namespace["__name__"])

    def getattr_(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where[name], package), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted([*namespace, *where])

    return getattr_, dir_
