"""A themes edit that loses to retention leaves no blob behind. The edit writes its new version to a new blob
first, then points the row at it. If retention deleted the job (its row, then its blobs) in between, the
conditional write finds no row. That is a 404, and the new blob is deleted with it. Before, it stayed under the
job's folder with no row until the daily sweep took the folder, a retention period later."""

from __future__ import annotations

from typing import Any

import pytest

from shared.core.names import job_prefix
from shared.platform import Platform
from tests.support.direct import http
from tests.support.synthetic_result import planted_job


def test_an_edit_whose_job_expired_meanwhile_is_a_404_and_keeps_no_blob(
    platform: Platform, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = planted_job(platform)
    result = http("get_job_result", "GET", f"jobs/{job_id}/result", route_params={"id": job_id})
    blobs, jobs = platform.stores.blobs, platform.stores.jobs
    put = blobs.put

    def expiring_first(name: str, data: bytes, *args: Any) -> None:
        if "result-edit-" in name:  # retention ran between the edit's read and its write
            jobs.delete(jobs.get("local", job_id))
            blobs.delete_prefix(job_prefix("local", job_id))
        put(name, data, *args)

    monkeypatch.setattr(blobs, "put", expiring_first)
    resp = http("edit_job_themes", "PATCH", f"jobs/{job_id}/themes", route_params={"id": job_id},
                headers={"If-Match": result.headers["ETag"]},
                body={"edits": [{"op": "rename", "theme": "t1", "label": "Late"}]})
    assert resp.status_code == 404, resp.get_body()
    container = blobs.container  # type: ignore[attr-defined]
    assert [b.name for b in container.list_blobs(name_starts_with=job_prefix("local", job_id))] == []
