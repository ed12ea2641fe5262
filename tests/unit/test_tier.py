"""The unit tier starts no database: a test under tests/unit/ that asks for one fails, saying where it belongs,
instead of quietly starting the embedded PostgreSQL (tests/unit/conftest.py)."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("fixture", ["db", "admin_url", "citus_url"])
def test_a_unit_test_that_asks_for_a_database_fails_saying_where_it_belongs(
    request: pytest.FixtureRequest, fixture: str
) -> None:
    with pytest.raises(pytest.fail.Exception, match="tier without a database"):
        request.getfixturevalue(fixture)
