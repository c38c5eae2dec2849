"""``If-None-Match: *`` on ``GET /api/jobs/{id}/responses`` answers for the query it came with (review41): the
304 was given from the job row alone, before the filters were checked against the result, so ``*`` with an unknown
theme or metadata key was a 304 where the same request without it is a 422 (RFC 9110 13.2.1: preconditions are
ignored when the unconditional answer would not be a 2xx). A specific ETag is bound to its filters (it came from
a 200 for them), so it keeps its cheap 304."""

from __future__ import annotations

from typing import Any

import pytest

from shared.platform import Platform
from tests.support.direct import body_of, http
from tests.support.synthetic_result import planted_job


def _plant(platform: Platform) -> str:
    return planted_job(platform)


def _get(job_id: str, params: dict[str, str], inm: str) -> Any:
    return http("list_job_responses", "GET", f"jobs/{job_id}/responses", params=params,
                headers={"If-None-Match": inm}, route_params={"id": job_id})


@pytest.mark.parametrize("inm", ["*", '"x", *', " * "])
@pytest.mark.parametrize(("params", "field"), [({"theme": "t99"}, "theme"), ({"subtheme": "t99.9"}, "subtheme"),
                                               ({"metadata[colour]": "red"}, "metadata[colour]")])
def test_a_wildcard_with_a_filter_naming_nothing_is_the_422(platform: Platform, params: dict[str, str], field: str,
                                                            inm: str) -> None:
    resp = _get(_plant(platform), params, inm)
    assert resp.status_code == 422, resp.get_body()
    assert [e["field"] for e in body_of(resp)["errors"]] == [field]


def test_a_wildcard_with_good_filters_and_a_held_etag_are_304(platform: Platform) -> None:
    job_id = _plant(platform)
    assert _get(job_id, {"theme": "t1"}, "*").status_code == 304
    first = _get(job_id, {"theme": "t1"}, '"none"')
    assert first.status_code == 200
    assert _get(job_id, {"theme": "t1"}, first.headers["ETag"]).status_code == 304
