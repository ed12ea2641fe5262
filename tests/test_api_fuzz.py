"""A property-based fuzz of the API's OpenAPI document (schemathesis): whatever it sends, with a
valid key of a tenant, no answer is a 5xx and every answer matches the document. Bounded to a
couple of dozen examples per operation."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error, response_schema_conformance
from schemathesis.core.result import Ok
from support.api_server import serve

from jobs.db import Database
from jobs.service.keys import create_key


@pytest.mark.slow  # schemathesis fuzzes every operation (~40 s)
def test_no_server_errors_and_answers_match_the_schema(db: Database) -> None:
    secret = create_key(db, "acme", ("recall", "write", "admin"))[1]
    with serve(db) as url:
        schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
        operations = []
        for result in schema.get_all_operations():
            assert isinstance(result, Ok), result
            operations.append(result.ok())
        assert len(operations) >= 10
        for operation in operations:

            @given(case=operation.as_strategy())
            @settings(max_examples=20, deadline=None, database=None, suppress_health_check=list(HealthCheck))
            def fuzz(case: schemathesis.Case[Any]) -> None:
                case.call_and_validate(
                    base_url=url,
                    headers={"Authorization": f"Bearer {secret}"},
                    checks=[not_a_server_error, response_schema_conformance],
                )

            fuzz()
