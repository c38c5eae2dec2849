"""An empty query parameter is the parameter absent, on every route: ``GET /result?format=`` was a 422 "unknown format"
where the job list and the responses route read ``?limit=`` / ``?cursor=`` as their defaults (review41)."""

from __future__ import annotations

import pytest

from tests.support.direct import body_of, http, run_worker_once
from tests.support.platform import fast_settings


@pytest.fixture(autouse=True)
def _env(storage_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    fast_settings(monkeypatch)


def test_an_empty_format_is_the_json_result() -> None:
    job = body_of(http("submit_job", "POST", "jobs", body={"pipeline": "echo", "input": 1}))["id"]
    assert run_worker_once() is not None
    got = [http("get_job_result", "GET", f"jobs/{job}/result", params=p, route_params={"id": job})
           for p in ({"format": ""}, {})]
    assert [r.status_code for r in got] == [200, 200], [r.get_body() for r in got]
    assert got[0].get_body() == got[1].get_body() and got[0].mimetype == "application/json"
