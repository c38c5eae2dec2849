"""The dashboard end to end in headless Chromium: submit through the page, watch it finish, read the themes."""

from __future__ import annotations

import os
import re
import shutil
import urllib.request
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from devhost.process import HostProcess
from pipelines.thematic.sentiment import MODEL_NAME as SENTIMENT_MODEL
from tests.conftest import REPO_ROOT
from tests.e2e.conftest import Api
from tests.support.waiting import wait_in_page

TOPICS = {
    "delivery": ["My parcel arrived {} late", "The delivery was {} slow this time", "Courier delivered the package {} late",
                 "Shipping took {} longer than promised"],
    "price": ["The price is {} too high", "Far too expensive, {} overpriced", "The subscription cost is {} unfair",
              "I cannot afford this price, {} expensive"],
    "app": ["The mobile app crashes {} on login", "The app keeps freezing {} on my phone",
            "App is {} buggy after the update", "The app crashes {} when I open it"],
}
FILLS = ["really", "very", "again", "always"]


def responses() -> list[str]:
    """39 short responses in three obvious topics (delivery, price, the app)."""
    out = []
    for templates in TOPICS.values():
        out += [t.format(f) for t in templates for f in FILLS[:3]]
        out.append(templates[0].format("so"))
        out.append(templates[1].format("extremely"))
        out.append(templates[2].format("quite"))
    return out[:39]


def open_ui(page: Any, host: HostProcess, api: Api, hash_: str = "") -> None:
    page.goto(f"{host.url}/api/ui?code={api.key}{hash_}")
    page.wait_for_selector("main h1")


def _is_job(request: Any, job_id: str) -> bool:
    return re.search(rf"/api/jobs/{job_id}$", request.url.split("?")[0]) is not None


def job_requests(page: Any, job_id: str, event: str = "request") -> list[Any]:
    """Collects the page's requests of the job itself (not its result) from now on: as they are sent (``request``),
    or once their answer was read (``requestfinished``). A request's ``timing`` is the browser's own clock."""
    seen: list[Any] = []
    page.on(event, lambda r: seen.append(r) if _is_job(r, job_id) else None)
    return seen


def test_ui_needs_the_key_and_never_embeds_it(host: HostProcess, api: Api) -> None:
    status, _, _ = api.call("GET", "/api/ui", key=False)
    assert status == 401
    with urllib.request.urlopen(f"{host.url}/api/ui?code={api.key}") as resp:  # the real host accepts ?code= too
        html = resp.read().decode()
        headers = resp.headers
    assert api.key not in html
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    assert headers["Referrer-Policy"] == "no-referrer" and headers["Cache-Control"] == "no-store"
    assert '<script type="module">' in html and 'src="app.js"' not in html


def test_submit_watch_and_read_themes(page: Any, host: HostProcess, api: Api, tmp_path: Path) -> None:
    open_ui(page, host, api)
    # The key moved from the address bar to sessionStorage.
    assert "code=" not in page.url
    assert page.evaluate("sessionStorage.getItem('thematiq.key')") == api.key

    page.get_by_role("link", name="New analysis").first.click()
    page.get_by_label("Paste responses, one per line").fill("\n".join(responses()))
    page.get_by_label("Minimum theme size").fill("3")
    page.get_by_label("Maximum themes").fill("6")
    page.get_by_label("LLM").select_option("off")
    page.get_by_role("button", name="Start analysis").click()
    page.wait_for_url(re.compile(r"#/jobs/[0-9a-f]{28}$"))
    job_id = page.url.rsplit("/", 1)[1]
    assert api.job(job_id)["params"]["llm"] == "off"

    # Live progress, then success; the themes appear without a reload.
    expect(page.locator("#job-live")).to_contain_text(re.compile("succeeded|failed|cancelled"), timeout=120_000)
    done = api.job(job_id)
    assert done["status"] == "succeeded", done
    expect(page.locator("#job-live")).to_contain_text("succeeded")
    page.wait_for_selector("#themes li.theme")
    polls = job_requests(page, job_id)

    status, _, doc = api.call("GET", f"/api/jobs/{job_id}/result")
    assert status == 200 and doc["themes"], doc
    # Issue 23: the summary says which source made the sentiment (here the default, the classifier over the
    # fast encoder's vectors).
    assert doc["sentiment"]["source"] == "model" and doc["sentiment"]["model"] == SENTIMENT_MODEL
    expect(page.locator("#sentiment-source-note")).to_have_text(f"sentiment: the sentiment model ({SENTIMENT_MODEL})")
    texts = {str(i + 1): t for i, t in enumerate(responses())}
    for theme in doc["themes"]:
        row = page.locator(f"li.theme[data-theme-id='{theme['id']}']")
        assert row.locator(".theme-label").inner_text() == theme["label"]
        assert row.locator(".theme-count b").inner_text() == str(theme["count"])
        assert f"{theme['share'] * 100:.1f}%" in row.locator(".theme-count").inner_text()
        width = row.locator(".bar").evaluate("e => e.style.width")
        assert abs(float(width.rstrip("%")) - theme["share"] * 100) < 0.1
        assert row.locator(".keywords li").all_inner_texts() == theme["keywords"]
        row.locator("button.theme-head").focus()      # keyboard: a theme opens with Enter
        page.keyboard.press("Enter")
        assert row.locator("button.theme-head").get_attribute("aria-expanded") == "true"
        assert row.locator(".quotes q").all_inner_texts() == [q["text"] for q in theme["quotes"]]
        members = [str(a["response_id"]) for a in doc["assignments"]
                   if any(r["theme_id"] == theme["id"] for r in a["themes"])]
        items = row.locator(".responses li")
        assert theme["count"] == len(members)
        expect(items).to_have_count(len(members))  # a page of GET …/responses
        # Texts come from the responses route (the result has ids only).
        first = items.first
        rid = first.get_attribute("data-response-id")
        assert rid in members and texts[rid] in first.inner_text()
    other = [a for a in doc["assignments"] if a["bucket"] == "other"]
    unusable = [a for a in doc["assignments"] if a["bucket"] == "unusable"]
    assert page.locator("li.theme[data-theme-id='other'] .theme-count b").inner_text() == str(len(other))
    assert page.locator("li.theme[data-theme-id='unusable'] .theme-count b").inner_text() == str(len(unusable))
    # Collapse all but the first theme for the screenshot.
    expanded = page.locator("li.theme button.theme-head[aria-expanded='true']")
    while expanded.count() > 1:
        expanded.nth(1).click()

    with page.expect_download() as dl:
        page.get_by_role("button", name="Download CSV").click()
    assert Path(dl.value.path()).read_text().startswith("response_id")

    page.screenshot(path=str(tmp_path / "themes.png"), full_page=True)
    if os.environ.get("UPDATE_SCREENSHOTS") == "1":
        (REPO_ROOT / "docs" / "img").mkdir(parents=True, exist_ok=True)
        shutil.copy(tmp_path / "themes.png", REPO_ROOT / "docs" / "img" / "themes.png")

    # Terminal: no further polls of this job, however long the page stays open.
    page.wait_for_timeout(4 * 1000)
    assert polls == [], [r.url for r in polls]


def stub_visibility(page: Any, state: str) -> float:
    """Makes the page hidden or visible; returns the browser's clock (ms since the epoch) at the change."""
    return float(page.evaluate("""state => {
        Object.defineProperty(document, 'visibilityState', {configurable: true, get: () => state});
        Object.defineProperty(document, 'hidden', {configurable: true, get: () => state === 'hidden'});
        document.dispatchEvent(new Event('visibilitychange'));
        return Date.now();
    }""", state))


def _answered_at(request: Any) -> float:
    """When the browser had read the request's answer (ms since the epoch, the browser's clock)."""
    return float(request.timing["startTime"] + request.timing["responseEnd"])


def test_polling_backs_off_when_hidden_then_cancel(page: Any, host: HostProcess, api: Api) -> None:
    job = api.submit("sleep", {"seconds": 60, "steps": 60})
    api.wait(job["id"], timeout=30, until=lambda j: j["status"] == "running")
    open_ui(page, host, api, f"#/jobs/{job['id']}")
    expect(page.locator("#job-live")).to_contain_text("running")
    polls = job_requests(page, job["id"])
    answered = job_requests(page, job["id"], "requestfinished")
    # Every 1.5 s while visible: two polls arrive, however slowly a loaded machine lets the page run (waited on, not
    # timed: at load 12-25 a fixed 3.2 s window once saw only one).
    wait_in_page(page, lambda: len(polls) >= 2, what="two polls of the visible page")

    hidden_at = stub_visibility(page, "hidden")
    # The poll already on its way (its timer was set while visible, or its request was in flight) still goes out;
    # once its answer is read the poller is on the hidden delays. Waited for, not a fixed 2 s: on a loaded machine
    # that timer and that answer came later than that, and the test counted the poll as one sent while hidden.
    wait_in_page(page, lambda: any(_answered_at(r) >= hidden_at for r in answered),
                 what="the answer to the poll on its way when the page was hidden")
    polls.clear()
    page.wait_for_timeout(5 * 1000)
    assert polls == [], [r.url for r in polls]  # hidden: the next one is 15 s away (then 30, 60, 120)

    answered.clear()
    visible_at = stub_visibility(page, "visible")  # back in view: polls at once, not 15 s later
    wait_in_page(page, lambda: answered, what="a poll once the page is visible again")
    # "At once" on the browser's clock (the request's own start), so a test process slowed by a loaded machine
    # neither fails it nor stretches it towards the hidden timer, which is still ~10 s away.
    assert answered[0].timing["startTime"] - visible_at < 8_000, (answered[0].timing, visible_at)

    page.get_by_role("button", name="Cancel job").click()
    expect(page.locator("#job-live")).to_contain_text("cancelled", timeout=30_000)
    assert api.job(job["id"])["status"] == "cancelled"
    assert page.get_by_role("button", name="Cancel job").is_disabled()

    # The list shows it under its status filter, and stops refreshing once every job on it has finished.
    page.get_by_role("link", name="Jobs", exact=True).click()
    page.get_by_label("Status").select_option("cancelled")
    row = page.locator(f"tr[data-job-id='{job['id']}']")
    row.wait_for()
    assert "cancelled" in row.inner_text() and "sleep" in row.inner_text()
    expect(page.locator("#list-updated")).to_contain_text("not refreshing")
    page.get_by_label("Status").select_option("succeeded")
    page.wait_for_selector(f"tr[data-job-id='{job['id']}']", state="detached")


def test_failed_job_shows_reason_and_retries(page: Any, host: HostProcess, api: Api) -> None:
    job = api.submit("sleep", {"seconds": 0.2, "steps": 2, "fail": "permanent"})
    api.wait(job["id"], timeout=30)
    open_ui(page, host, api, f"#/jobs/{job['id']}")
    error = page.locator("#job-error")
    error.wait_for()
    assert "sleep failed permanently on purpose" in error.inner_text()
    page.get_by_role("button", name="Retry as a new job").click()
    page.wait_for_url(lambda url: re.search(r"#/jobs/[0-9a-f]{28}$", url) is not None and job["id"] not in url)
    new_id = page.url.rsplit("/", 1)[1]
    assert new_id != job["id"]
    again = api.job(new_id)
    assert again["pipeline"] == "sleep" and again["params"] == api.job(job["id"])["params"]
    page.wait_for_selector("#job-error")   # it fails the same way, and says so
