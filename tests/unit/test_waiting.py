"""tests/support/waiting.py's wait_until: it returns the first true value, and when none comes it fails
naming what it waited for and the last value it saw."""

from __future__ import annotations

import pytest
from support.waiting import wait_until


def test_wait_until_returns_the_first_true_value() -> None:
    values = iter([0, [], "", "ready", "later"])
    assert wait_until(lambda: next(values), 5, "a non-empty value", every=0) == "ready"


def test_wait_until_names_what_it_waited_for_and_the_last_value_seen() -> None:
    seen: list[str] = []

    def status() -> str | list[str]:
        """'' ("not yet") on every call after the first, which answers []: the last value differs from the first."""
        seen.append("call")
        return "" if len(seen) > 1 else []

    with pytest.raises(AssertionError) as failure:
        wait_until(status, 0.2, "the job to finish", every=0.01)
    assert len(seen) > 1
    assert str(failure.value) == "waited 0.2 s for the job to finish, in vain; the last value seen: ''"
