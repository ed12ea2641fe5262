"""The grammar of a pruning policy (``episodes prune --policy``, ``EPISODES_PRUNE_POLICY``).

A policy is clauses separated by ``;`` (blank clauses are ignored)::

    clause     := "keep" <duration>                         protects episodes younger than <duration>
                | "keep" <importance>                       protects episodes whose importance satisfies it
                | "delete" [<importance>] "after" <duration>  selects episodes older than <duration>
                                                            (and, if given, whose importance satisfies it)
    importance := "importance" ("<" | "<=" | ">" | ">=") <number from 0 to 1>
    duration   := <whole number> ("h" | "d" | "w" | "y")   hours, days, weeks, years of 365 days

Words are case-insensitive; spaces around the operator are allowed. An episode's age is the time
since its session ended. **An episode is deleted when some delete clause selects it and no keep
clause protects it**; the order of the clauses does not matter. Only current session episodes are
candidates, and a pinned one never is (``episodes_may_prune``). A policy needs at least one delete
clause (otherwise it could delete nothing), and ``delete`` always names an age: nothing younger is
ever pruned by mistake.

Parsing is strict: the first bad clause raises :class:`~jobs.errors.PolicyInvalid` with one line
naming the clause (its number and text) and what was expected there. This module is pure (no
database), so :mod:`jobs.config` parses ``EPISODES_PRUNE_POLICY`` when settings load.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from jobs.errors import PolicyInvalid

_UNITS = {"h": 3600, "d": 86400, "w": 7 * 86400, "y": 365 * 86400}
_DURATION = re.compile(r"(\d+)([a-z]+)?")
_IMPORTANCE = re.compile(r"importance\s*(<=|>=|<|>|=+|!=)?\s*(\S*)")
_AFTER = re.compile(r"(.*?)\s*\bafter\b\s*(.*)")
_OPS = ("<", "<=", ">", ">=")


@dataclass(frozen=True)
class Clause:
    """One clause: ``action`` with an age bound and/or an importance comparison.

    ``keep`` with ``newer_than`` protects episodes that ended less than that many seconds ago;
    ``delete`` with ``older_than`` selects those that ended more than that long ago."""

    number: int
    text: str
    action: Literal["keep", "delete"]
    newer_than: int | None = None
    older_than: int | None = None
    op: str | None = None
    importance: float | None = None

    def as_json(self) -> dict[str, Any]:
        """The clause as ``episodes_policy_selects`` (migration 0015) reads it: absent keys are not tested."""
        fields = {
            "n": self.number,
            "action": self.action,
            "newer_than": self.newer_than,
            "older_than": self.older_than,
            "op": self.op,
            "importance": self.importance,
        }
        return {k: v for k, v in fields.items() if v is not None}


@dataclass(frozen=True)
class PrunePolicy:
    """A parsed policy: its clauses in the order written, and the text it was parsed from."""

    text: str
    clauses: tuple[Clause, ...]

    def as_json(self) -> list[dict[str, Any]]:
        return [c.as_json() for c in self.clauses]


def parse_policy(text: str) -> PrunePolicy:
    """Parse ``text`` (see the module docstring) or raise :class:`PolicyInvalid`."""
    parts = [p.strip() for p in text.split(";")]
    clauses = tuple(_clause(i, part) for i, part in enumerate(parts, 1) if part)
    if not clauses:
        raise PolicyInvalid(
            'the pruning policy is empty: expected clauses like "keep 30d; delete importance<0.5 after 90d"'
        )
    if not any(c.action == "delete" for c in clauses):
        raise PolicyInvalid(
            f'the pruning policy "{text.strip()}" has no delete clause: expected at least one '
            '"delete [importance<op><number>] after <duration>"'
        )
    return PrunePolicy(text.strip(), clauses)


def _clause(number: int, text: str) -> Clause:
    def bad(expected: str) -> PolicyInvalid:
        return PolicyInvalid(f'policy clause {number} "{text}": expected {expected}')

    word, _, rest = text.partition(" ")
    action, rest = word.lower(), rest.strip()
    if action == "keep":
        if not rest:
            raise bad('"keep <duration>" or "keep importance<op><number>"')
        if rest.lower().startswith("importance"):
            op, value = _importance(rest, bad)
            return Clause(number, text, "keep", op=op, importance=value)
        return Clause(number, text, "keep", newer_than=_duration(rest, bad))
    if action == "delete":
        match = _AFTER.fullmatch(rest.lower())
        if match is None:
            raise bad('"after <duration>"')
        condition, age = match.groups()
        older_than = _duration(age, bad)
        if not condition:
            return Clause(number, text, "delete", older_than=older_than)
        if not condition.startswith("importance"):
            raise bad('"importance<op><number>" or "after <duration>"')
        op, value = _importance(condition, bad)
        return Clause(number, text, "delete", older_than=older_than, op=op, importance=value)
    raise bad('"keep" or "delete"')


def _duration(text: str, bad: Callable[[str], PolicyInvalid]) -> int:
    match = _DURATION.fullmatch(text.strip().lower())
    if match is None or match.group(2) not in _UNITS:
        raise bad("a duration: a whole number with h, d, w or y (e.g. 90d)")
    seconds = int(match.group(1)) * _UNITS[match.group(2)]
    if seconds <= 0:
        raise bad("a duration longer than zero")
    return seconds


def _importance(text: str, bad: Callable[[str], PolicyInvalid]) -> tuple[str, float]:
    match = _IMPORTANCE.fullmatch(text.strip().lower())
    if match is None or match.group(1) not in _OPS:
        raise bad("importance followed by <, <=, > or >= and a number")
    try:
        value = float(match.group(2))
    except ValueError:
        raise bad("a number from 0 to 1 after the operator") from None
    if not 0.0 <= value <= 1.0:
        raise bad("a number from 0 to 1 after the operator")
    return match.group(1), value
