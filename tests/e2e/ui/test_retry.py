"""POST /api/jobs/{id}/retry (shared/retry_job.py) over HTTP: same pipeline, params and input as a new job."""

from __future__ import annotations

import secrets

from tests.e2e.conftest import Api


def test_retry_resubmits_stored_input_idempotently_and_per_tenant(api: Api) -> None:
    # Large enough to be claim-checked to Blob Storage, so both input paths are covered.
    big = [secrets.token_hex(64) for _ in range(1500)]
    failed = api.submit("sleep", {"seconds": 0.1, "steps": 1, "fail": "permanent"}, big)
    small = api.submit("sleep", {"seconds": 0.1, "steps": 1, "fail": "permanent"}, ["x"])
    ok = api.submit("echo", {}, {"hello": "world"})
    for job in (failed, small, ok):
        api.wait(job["id"], timeout=30)

    for src in (failed, small):
        status, headers, new = api.call("POST", f"/api/jobs/{src['id']}/retry")
        assert status == 202, new
        assert new["id"] != src["id"] and new["pipeline"] == "sleep" and new["params"] == api.job(src["id"])["params"]
        assert headers["Location"].endswith(new["id"])
        # A second click returns the same new job.
        status, _, again = api.call("POST", f"/api/jobs/{src['id']}/retry")
        assert status == 200 and again["id"] == new["id"]
        assert api.wait(new["id"], timeout=30)["error"]["message"].startswith("sleep failed permanently")

    status, _, body = api.call("POST", f"/api/jobs/{ok['id']}/retry")
    assert status == 409 and body["errors"][0]["field"] == "status"
    status, _, _ = api.call("POST", f"/api/jobs/{failed['id']}/retry", headers={"x-thematiq-tenant": "someone-else"})
    assert status == 404
    status, _, _ = api.call("POST", f"/api/jobs/{failed['id']}/retry", key=False)
    assert status == 401
    status, _, _ = api.call("POST", "/api/jobs/not-a-job/retry")
    assert status in (400, 404)


def test_retry_of_a_cancelled_job(api: Api) -> None:
    job = api.submit("sleep", {"seconds": 30, "steps": 30}, {"keep": ["this", 1, None]})
    api.call("POST", f"/api/jobs/{job['id']}/cancel")
    api.wait(job["id"], timeout=30)
    status, _, new = api.call("POST", f"/api/jobs/{job['id']}/retry")
    assert status == 202, new
    api.call("POST", f"/api/jobs/{new['id']}/cancel")
    assert api.wait(new["id"], timeout=30)["status"] == "cancelled"


def test_a_client_key_that_looks_like_a_retry_key_does_not_take_the_retry(api: Api) -> None:
    failed = api.submit("sleep", {"seconds": 0.1, "steps": 1, "fail": "permanent"}, ["x"])
    api.wait(failed["id"], timeout=30)
    # A client's own submission under the key the retry endpoint used to derive from the job id.
    status, _, mine = api.call("POST", "/api/jobs", {"pipeline": "echo", "params": {}, "input": [1]},
                               headers={"Idempotency-Key": f"retry-{failed['id']}"})
    assert status == 202, mine
    status, _, new = api.call("POST", f"/api/jobs/{failed['id']}/retry")
    assert status == 202, new  # neither a 409 (another body under "its" key) nor the client's echo job
    assert new["id"] != mine["id"] and new["pipeline"] == "sleep"
    status, _, again = api.call("POST", f"/api/jobs/{failed['id']}/retry")
    assert status == 200 and again["id"] == new["id"]  # still idempotent
    status, _, replay = api.call("POST", "/api/jobs", {"pipeline": "echo", "params": {}, "input": [1]},
                                 headers={"Idempotency-Key": f"retry-{failed['id']}"})
    assert status == 200 and replay["id"] == mine["id"]
