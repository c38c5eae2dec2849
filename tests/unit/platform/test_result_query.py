"""``GET /api/jobs/{id}/result`` refuses a query parameter it does not know (review41): ``?fromat=csv`` (a typo)
answered the JSON result with a 200, where the job list and the responses route name an unknown parameter in a
422; the result route does too now, before any storage read."""

from __future__ import annotations

import pytest

from shared.platform import Platform
from tests.support.direct import body_of, http


@pytest.mark.parametrize("params", [{"fromat": "csv"}, {"format": "csv", "sheet": "1"}, {"Format": "csv"}])
def test_an_unknown_query_parameter_is_a_422_naming_it(platform: Platform, params: dict[str, str]) -> None:
    job = body_of(http("submit_job", "POST", "jobs", body={"pipeline": "echo", "input": 1}))["id"]
    assert platform.fake is not None
    platform.fake.reset_ops()
    resp = http("get_job_result", "GET", f"jobs/{job}/result", params=params, route_params={"id": job})
    assert resp.status_code == 422, resp.get_body()
    assert resp.mimetype == "application/problem+json"
    unknown = sorted(set(params) - {"format"})
    assert [e["field"] for e in body_of(resp)["errors"]] == unknown[:1]
    assert not platform.fake.ops()


def test_format_and_the_function_key_are_known(platform: Platform) -> None:
    job = body_of(http("submit_job", "POST", "jobs", body={"pipeline": "echo", "input": 1}))["id"]
    resp = http("get_job_result", "GET", f"jobs/{job}/result", params={"format": "json", "code": "k"},
                route_params={"id": job})
    assert resp.status_code == 409, resp.get_body()  # queued: no result yet, but the query was fine
    assert [e["field"] for e in body_of(resp)["errors"]] == ["status"]


