"""Named runtime queries, kept in sql/*.sql as ``-- name: <name>`` blocks.

Code asks for SQL by name (``query("claim_transcript")``); a test checks every name used in the
code exists. Only identifiers are ever composed in Python (psycopg.sql).
"""

from __future__ import annotations

import re
from functools import cache

from jobs.resources import sql_dir

_HEADER = re.compile(r"^-- name: ([a-z0-9_]+)\s*$", re.MULTILINE)


@cache
def all_queries() -> dict[str, str]:
    """Every named query of every top-level sql/*.sql file; a name may be defined only once."""
    found: dict[str, str] = {}
    where: dict[str, str] = {}
    for entry in sorted(sql_dir().iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".sql") or not entry.is_file():
            continue
        parts = _HEADER.split(entry.read_text(encoding="utf-8"))
        for name, body in zip(parts[1::2], parts[2::2]):
            if name in found:
                raise RuntimeError(f"query {name!r} is defined in sql/{where[name]} and sql/{entry.name}")
            found[name], where[name] = body.strip(), entry.name
    return found


def query(name: str) -> str:
    try:
        return all_queries()[name]
    except KeyError:
        raise KeyError(f"no query named {name!r} in sql/*.sql") from None
