"""Schemathesis fuzzes the running local host from its own OpenAPI document: no 5xx, every error is problem+json,
and responses match the documented status codes, content types and schemas."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from tests.support.cluster import PROBLEM, Cluster

MAX_EXAMPLES = 25


@pytest.fixture(scope="module")
def fuzz_host(azurite: str) -> Iterator[Cluster]:
    c = Cluster(azurite, 1)
    try:
        yield c.start()
    finally:
        c.stop()


@schemathesis.check
def problem_json_errors(ctx: Any, response: Any, case: Any) -> bool | None:
    """Every 4xx/5xx the app produces is RFC 9457 problem+json whose status matches."""
    if response.status_code < 400:
        return None
    ctype = response.headers.get("content-type") or response.headers.get("Content-Type") or [""]
    ctype = ctype[0] if isinstance(ctype, list) else ctype
    if PROBLEM not in ctype:
        raise AssertionError(f"{response.status_code} is not problem+json ({ctype!r}): {response.text[:200]!r}")
    body = response.json()
    if body.get("status") != response.status_code or not body.get("type") or not body.get("title"):
        raise AssertionError(f"malformed problem: {body}")
    return None


CHECKS = [
    not_a_server_error,
    problem_json_errors,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


def test_api_fuzz(fuzz_host: Cluster) -> None:
    assert fuzz_host.api_host is not None
    base = fuzz_host.api_host.url
    headers = {"x-functions-key": fuzz_host.env["DEVHOST_FUNCTION_KEY"]}
    schema = schemathesis.openapi.from_url(base + "/api/openapi.json", headers=headers)
    failures: list[str] = []
    operations = 0
    statuses: Counter[int] = Counter()
    # Driven by hand (one hypothesis run per operation): schemathesis' pytest plugin
    # does not work with pytest 9 yet.
    for result in schema.get_all_operations():
        operation = result.ok()
        operations += 1

        @given(case=operation.as_strategy())
        @settings(
            max_examples=MAX_EXAMPLES,
            deadline=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
            phases=[Phase.explicit, Phase.generate],
            database=None,
        )
        def run(case: Any) -> None:
            response = case.call_and_validate(base_url=base + "/api", headers=headers, checks=CHECKS)
            statuses[response.status_code] += 1

        try:
            run()
        except Exception as err:
            failures.append(f"{operation.label}: {str(err)[:1500]}")
    print(f"fuzzed {operations} operations, {sum(statuses.values())} requests: {dict(statuses)}")
    assert operations >= 7 and sum(statuses.values()) >= operations * 10
    assert not failures, "\n\n".join(failures)
