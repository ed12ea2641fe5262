"""The fields of a transcript record beside its messages: a field nobody knows is refused, naming the
field it was likely meant to be, and free-form ``metadata`` is bounded.

A silently dropped field is worse than a refused record: a camelCase ``endedAt`` used to be ignored,
``ended_at`` stayed NULL and the session was never summarised until idle close. Imports nothing of
``jobs`` (it sits below :mod:`jobs.models`).
"""

from __future__ import annotations

import difflib
import json
import re
from typing import Any

METADATA_BYTES = 16_384  # a transcript's free-form metadata, as JSON
METADATA_DEPTH = 16  # ... and how deep its objects and lists may nest
_CAMEL = re.compile(r"(?<=[a-z0-9])([A-Z])")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def unknown_field(key: str, known: list[str]) -> str:
    """Why ``key`` is refused, with the field it most likely meant (camelCase, a typo)."""
    snake = _CAMEL.sub(r"_\1", key).lower().replace("-", "_")
    guess = snake if snake in known else next(iter(difflib.get_close_matches(snake, known, n=1, cutoff=0.6)), None)
    hint = f"; did you mean {guess!r}?" if guess else ""
    return f"unknown field {key!r}{hint} (free-form data goes under 'metadata')"


def check_metadata(value: dict[str, Any]) -> dict[str, Any]:
    """``value`` if it is within bounds (size, depth, storable text), else ValueError saying why."""
    if _depth(value) > METADATA_DEPTH:
        raise ValueError(f"metadata is nested deeper than {METADATA_DEPTH} levels")
    text = json.dumps(value, ensure_ascii=False)
    size = len(text.encode("utf-8", errors="surrogatepass"))
    if size > METADATA_BYTES:
        raise ValueError(f"metadata is {size:,} bytes as JSON, over the limit of {METADATA_BYTES:,}")
    if "\\u0000" in json.dumps(value) or _SURROGATE.search(text):
        raise ValueError("metadata contains a NUL character or invalid UTF-8")
    return value


def _depth(value: Any, limit: int = METADATA_DEPTH + 1) -> int:
    """How deep ``value`` nests (objects and lists), counted no further than ``limit``."""
    if limit <= 0 or not isinstance(value, (dict, list)):
        return 0
    children = value.values() if isinstance(value, dict) else value
    return 1 + max((_depth(c, limit - 1) for c in children), default=0)
