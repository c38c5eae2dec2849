"""The API reference page (GET /api/docs) in headless Chromium: Swagger UI, inlined, rendering /api/openapi.json."""

from __future__ import annotations

import urllib.error
import urllib.request
from typing import Any

from tests.e2e.conftest import Api


def test_docs_page_lists_the_operations_of_the_document(page: Any, api: Api) -> None:
    status, _, doc = api.call("GET", "/api/openapi.json")
    assert status == 200
    operations = [(m.upper(), path) for path, item in doc["paths"].items() for m in item]
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(f"{api.base}/api/docs?code={api.key}")
    page.wait_for_selector(".opblock-summary-path", timeout=20_000)
    assert page.title() == "Thematiq API reference"
    assert page.locator(".info .title").first.inner_text().startswith(doc["info"]["title"])
    # Every operation of the document is listed, with its method and path.
    rows = page.locator(".opblock-summary").all()
    shown = {(r.locator(".opblock-summary-method").inner_text().strip(),
              r.locator(".opblock-summary-path").inner_text().strip().replace("\u200b", "")) for r in rows}
    assert set(operations) <= shown, set(operations) - shown
    # The key left the URL at once; nothing was fetched from anywhere but this host.
    assert "code=" not in page.url
    # "Try it out" targets this deployment, where the page is served.
    assert page.locator(".servers select option").first.inner_text().strip().startswith("/api")
    assert all(u.startswith(api.base) or u.startswith("data:") for u in requests), requests
    assert any(u.endswith("/api/openapi.json") for u in requests)


def test_docs_page_needs_the_key_and_has_a_strict_csp(api: Api) -> None:
    req = urllib.request.Request(f"{api.base}/api/docs")
    try:
        urllib.request.urlopen(req, timeout=10)
        raise AssertionError("expected 401")
    except urllib.error.HTTPError as err:
        assert err.code == 401
    req = urllib.request.Request(f"{api.base}/api/docs", headers={"x-functions-key": api.key})
    with urllib.request.urlopen(req, timeout=10) as r:
        csp = r.headers["Content-Security-Policy"]
        html = r.read().decode()
    assert "default-src 'none'" in csp and "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert "https://" not in csp and api.key not in html and "<script src" not in html


def test_try_it_out_calls_this_deployment_with_the_key(page: Any, api: Api) -> None:
    page.goto(f"{api.base}/api/docs?code={api.key}")
    page.locator("#operations-default-list_jobs .opblock-summary").first.click()
    page.get_by_role("button", name="Try it out").click()
    page.get_by_role("button", name="Execute").click()
    status = page.locator(".live-responses-table tbody .response-col_status").first
    status.wait_for(timeout=15_000)
    assert status.inner_text().strip().startswith("200")
    assert '"items"' in page.locator(".live-responses-table .microlight, .live-responses-table pre").first.inner_text()
