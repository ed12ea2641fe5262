"""Named SQL, kept in .sql files as ``-- name: <name>`` blocks; code asks for it by name.

Runtime queries live in sql/*.sql (``query("claim_transcript")``); the report's queries in
reports/report.sql (:func:`named_queries`). This is the one parser of that format. A test checks
every name used in the code exists. Only identifiers are ever composed in Python (psycopg.sql).

A runtime query may take in another whole, as a line of its own ``{{ other_name }}`` (one level: the
other query takes in none), so a statement and a variant of it share one text rather than two copies.
"""

from __future__ import annotations

import re
from functools import cache

from jobs.resources import sql_dir

_HEADER = re.compile(r"^-- name: ([a-z0-9_]+)\s*$", re.MULTILINE)
_INCLUDE = re.compile(r"^[ \t]*\{\{ ([a-z0-9_]+) \}\}[ \t]*$", re.MULTILINE)


def named_queries(text: str, where: str = "<text>") -> dict[str, str]:
    """The ``-- name:`` blocks of one file's text; a name may appear once."""
    parts = _HEADER.split(text)
    found: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2]):
        if name in found:
            raise RuntimeError(f"query {name!r} is defined twice in {where}")
        found[name] = body.strip()
    return found


@cache
def all_queries() -> dict[str, str]:
    """Every named query of every top-level sql/*.sql file; a name may be defined only once."""
    found: dict[str, str] = {}
    where: dict[str, str] = {}
    for entry in sorted(sql_dir().iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".sql") or not entry.is_file():
            continue
        for name, body in named_queries(entry.read_text(encoding="utf-8"), f"sql/{entry.name}").items():
            if name in found:
                raise RuntimeError(f"query {name!r} is defined in sql/{where[name]} and sql/{entry.name}")
            found[name], where[name] = body, entry.name
    return {name: _include(name, body, found) for name, body in found.items()}


def _include(name: str, body: str, found: dict[str, str]) -> str:
    """``body`` with each ``{{ other }}`` line replaced by the query ``other`` (which includes none)."""

    def whole(match: re.Match[str]) -> str:
        other = found.get(match.group(1))
        if other is None or _INCLUDE.search(other):
            raise RuntimeError(
                f"query {name!r} includes {match.group(1)!r}, "
                + ("which is not defined" if other is None else "which includes another")
            )
        return other

    return _INCLUDE.sub(whole, body)


def query(name: str) -> str:
    """The runtime query ``name`` from sql/*.sql."""
    try:
        return all_queries()[name]
    except KeyError:
        raise KeyError(f"no query named {name!r} in sql/*.sql") from None
