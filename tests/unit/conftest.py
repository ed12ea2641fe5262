"""The unit tier has no database: the fixtures that start the embedded PostgreSQL or reach the Citus
cluster fail here, saying where a test that needs one belongs."""

from __future__ import annotations

from typing import NoReturn

import pytest

NO_DATABASE = (
    "tests/unit/ is the tier without a database (docs/development.md): a test that needs PostgreSQL "
    "belongs in tests/, beside the other tests of its feature"
)


@pytest.fixture(scope="session")
def pg_server() -> NoReturn:
    pytest.fail(NO_DATABASE)


@pytest.fixture(scope="session")
def citus_url() -> NoReturn:
    pytest.fail(NO_DATABASE)
