"""The dashboard polls cheaply: If-None-Match on the job page (304 while unchanged), paced by Retry-After."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import expect

from devhost.process import HostProcess
from tests.e2e.conftest import Api


def test_job_page_sends_if_none_match_and_gets_304(page: Any, host: HostProcess, api: Api) -> None:
    # A slow job whose progress moves rarely: most polls see nothing new.
    job = api.submit("sleep", {"seconds": 30, "steps": 2})
    api.wait(job["id"], timeout=30, until=lambda j: j["status"] == "running")
    pattern = re.compile(rf"/api/jobs/{job['id']}$")
    seen: list[tuple[int, str | None]] = []
    page.on("response", lambda r: seen.append((r.status, r.request.headers.get("if-none-match")))
            if pattern.search(r.url.split("?")[0]) and r.request.method == "GET" else None)
    page.goto(f"{host.url}/api/ui?code={api.key}#/jobs/{job['id']}")
    expect(page.locator("#job-live")).to_contain_text("running")
    page.wait_for_timeout(5_000)
    assert seen and seen[0][1] is None, seen                  # the first look has nothing to compare with
    assert any(status == 304 and etag for status, etag in seen), seen
    # Paced by Retry-After (at least 1 s here), never faster than the 1.5 s floor: at most 4 polls in ~5 s.
    assert len(seen) <= 5, seen
    api.call("POST", f"/api/jobs/{job['id']}/cancel")
    expect(page.locator("#job-live")).to_contain_text("cancelled", timeout=20_000)
