"""The evaluation's named SQL (jobs/eval/queries.sql, parsed by :func:`jobs.sql.named_queries`).

Kept beside the evaluation rather than in sql/: these queries run only in the scratch database an
evaluation creates and drops, never against the evaluated one.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files

from jobs.sql import named_queries


@cache
def _all() -> dict[str, str]:
    text = files("jobs.eval").joinpath("queries.sql").read_text(encoding="utf-8")
    return named_queries(text, "jobs/eval/queries.sql")


def eval_query(name: str) -> str:
    """The evaluation query ``name`` from jobs/eval/queries.sql."""
    try:
        return _all()[name]
    except KeyError:
        raise KeyError(f"no query named {name!r} in jobs/eval/queries.sql") from None
