"""The offline extractor's weights and thresholds are data (issue 48): one record each in ``rules/values.toml``, with
what it weighs and the commit that set it. The engine reads each by its id (:func:`value`, :func:`count`,
:func:`value_map`) once, at import; tests/unit/test_rule_values.py checks that every record is read."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from jobs.errors import ConfigError

_PATH = "jobs/extract/rules/values.toml"


@dataclass(frozen=True)
class Value:
    id: str
    weighs: str
    source: str
    number: float | int | None = None
    table: dict[str, float] = field(default_factory=dict)


def _number(raw: Any) -> bool:
    return isinstance(raw, (int, float)) and not isinstance(raw, bool)


def parse(raw: dict[str, Any], path: str = _PATH) -> dict[str, Value]:
    """The value records of one parsed file: an id, a ``value`` or a ``map`` of numbers, what it weighs, a source."""
    out: dict[str, Value] = {}
    for k, rec in enumerate(raw.get("value", ())):
        where = f"{path} value {k + 1} ({rec.get('id', '?')})"
        number, table = rec.get("value"), rec.get("map")
        if not rec.get("weighs") or not rec.get("source"):
            raise ConfigError(f"{where}: a value says what it weighs and where it came from (weighs, source)")
        if (number is None) == (table is None) or (number is not None and not _number(number)):
            raise ConfigError(f"{where}: give a number as 'value' or a table of numbers as 'map', one of them")
        if table is not None and not all(_number(v) for v in table.values()):
            raise ConfigError(f"{where}: every entry of 'map' is a number")
        if rec["id"] in out:
            raise ConfigError(f"{where}: the id repeats; give each value its own id")
        out[rec["id"]] = Value(rec["id"], rec["weighs"], rec["source"], number, dict(table or {}))
    return out


@cache
def load() -> dict[str, Value]:
    """Every record of ``rules/values.toml``, checked (:func:`parse`)."""
    return parse(tomllib.loads(resources.files("jobs.extract.rules").joinpath("values.toml").read_text("utf-8")))


def _record(id_: str) -> Value:
    found = load().get(id_)
    if found is None:
        raise ConfigError(f"{_PATH}: no value {id_!r}; add its record there")
    return found


def value(id_: str) -> float:
    """The weight or threshold ``id_``."""
    number = _record(id_).number
    if number is None:
        raise ConfigError(f"{_PATH}: {id_!r} is a map; read it with value_map")
    return float(number)


def count(id_: str) -> int:
    """The whole number ``id_`` (how many words, events or specifics count)."""
    number = _record(id_).number
    if not isinstance(number, int):
        raise ConfigError(f"{_PATH}: {id_!r} is not a whole number; write it without a decimal point")
    return number


def value_map(id_: str) -> dict[str, float]:
    """The table of weights ``id_`` by kind (event type, action kind)."""
    record = _record(id_)
    if not record.table:
        raise ConfigError(f"{_PATH}: {id_!r} is a single value; read it with value")
    return {k: float(v) for k, v in record.table.items()}
