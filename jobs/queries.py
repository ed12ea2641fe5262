"""Named runtime queries, kept in sql/queries.sql as ``-- name: <name>`` blocks.

Code asks for SQL by name (``query("claim_transcripts")``); a test checks every name used in the
code exists. Only identifiers are ever composed in Python (psycopg.sql).
"""

from __future__ import annotations

import re
from functools import cache

from jobs.resources import sql_dir

_HEADER = re.compile(r"^-- name: ([a-z0-9_]+)\s*$", re.MULTILINE)


@cache
def all_queries() -> dict[str, str]:
    text = (sql_dir() / "queries.sql").read_text(encoding="utf-8")
    parts = _HEADER.split(text)
    found: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2]):
        if name in found:
            raise RuntimeError(f"sql/queries.sql defines {name!r} twice")
        found[name] = body.strip()
    return found


def query(name: str) -> str:
    try:
        return all_queries()[name]
    except KeyError:
        raise KeyError(f"no query named {name!r} in sql/queries.sql") from None
