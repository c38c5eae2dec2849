"""The dashboard polls cheaply: If-None-Match on the job page (304 while unchanged), paced by Retry-After."""

from __future__ import annotations

import itertools
import re
from typing import Any

from playwright.sync_api import expect

from devhost.process import HostProcess
from tests.e2e.conftest import Api
from tests.support.waiting import wait_in_page


def test_job_page_sends_if_none_match_and_gets_304(page: Any, host: HostProcess, api: Api) -> None:
    # A slow job whose progress moves rarely: most polls see nothing new.
    job = api.submit("sleep", {"seconds": 30, "steps": 2})
    api.wait(job["id"], timeout=30, until=lambda j: j["status"] == "running")
    pattern = re.compile(rf"/api/jobs/{job['id']}$")
    seen: list[tuple[int, str | None, float]] = []  # status, If-None-Match, when it was sent (the browser's ms)
    page.on("response", lambda r: seen.append((r.status, r.request.headers.get("if-none-match"),
                                               r.request.timing["startTime"]))
            if pattern.search(r.url.split("?")[0]) and r.request.method == "GET" else None)
    page.goto(f"{host.url}/api/ui?code={api.key}#/jobs/{job['id']}")
    expect(page.locator("#job-live")).to_contain_text("running")
    # A 304 takes two looks at an unchanged job, after the first progress write (which may land after the first
    # look): waited for, not a fixed 5 s window, which a loaded machine filled with too few polls to see one.
    wait_in_page(page, lambda: any(status == 304 and etag for status, etag, _ in seen), what="a 304 to a poll")
    wait_in_page(page, lambda: len(seen) >= 4, what="four polls")
    assert seen and seen[0][1] is None, seen                  # the first look has nothing to compare with
    # Paced by Retry-After (at least 1 s here), never faster than the 1.5 s floor: on the browser's own clock, so a
    # slow machine can only lengthen the gaps (it used to be at most 4 polls in ~5 s of the test's clock).
    sent = [at for _, _, at in seen]
    gaps = [later - earlier for earlier, later in itertools.pairwise(sent)]
    assert all(gap >= 1_450 for gap in gaps), (gaps, seen)
    api.call("POST", f"/api/jobs/{job['id']}/cancel")
    expect(page.locator("#job-live")).to_contain_text("cancelled", timeout=60_000)
