"""The API reference page (GET /api/docs) in headless Chromium: Swagger UI, inlined, rendering /api/openapi.json;
without Swagger UI's build (npm swagger-ui-dist, installed by scripts/bootstrap), a 503 that names the step."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from blueprints import docs as docs_bp
from blueprints import swagger_assets
from devhost.process import HostProcess
from tests.e2e.conftest import Api, host_env


def test_docs_page_lists_the_operations_of_the_document(page: Any, api: Api) -> None:
    status, _, doc = api.call("GET", "/api/openapi.json")
    assert status == 200
    operations = [(m.upper(), path) for path, item in doc["paths"].items() for m in item]
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(f"{api.base}/api/docs?code={api.key}")
    page.wait_for_selector(".opblock-summary-path", timeout=60_000)
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
        urllib.request.urlopen(req, timeout=30)
        raise AssertionError("expected 401")
    except urllib.error.HTTPError as err:
        assert err.code == 401
    req = urllib.request.Request(f"{api.base}/api/docs", headers={"x-functions-key": api.key})
    with urllib.request.urlopen(req, timeout=30) as r:
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
    status.wait_for(timeout=60_000)
    assert status.inner_text().strip().startswith("200")
    assert '"items"' in page.locator(".live-responses-table .microlight, .live-responses-table pre").first.inner_text()


def _copy_build(tmp_path: Path) -> Path:
    src = swagger_assets.build_dir()
    if not (src / swagger_assets.MANIFEST).is_file():
        pytest.fail(f"Swagger UI is not installed: run {swagger_assets.BUILD_STEP}")
    dest = tmp_path / "swagger-ui"
    shutil.copytree(src, dest)
    return dest


def test_the_csp_hashes_follow_the_files_and_a_changed_file_is_refused(tmp_path: Path) -> None:
    build = _copy_build(tmp_path)
    page = docs_bp.build_docs_page(assets_dir=build)
    css = (build / "swagger-ui.css").read_text(encoding="utf-8")
    assert _csp_hash(css) in page.csp
    # Another css, recorded in the manifest as if installed: the CSP admits the new block, not the old one.
    manifest = json.loads((build / swagger_assets.MANIFEST).read_text())
    changed = css + "\n.swagger-ui{}"
    (build / "swagger-ui.css").write_text(changed, encoding="utf-8")
    manifest["files"]["swagger-ui.css"] = hashlib.sha256(changed.encode()).hexdigest()
    (build / swagger_assets.MANIFEST).write_text(json.dumps(manifest))
    page = docs_bp.build_docs_page(assets_dir=build)
    assert _csp_hash(changed) in page.csp and _csp_hash(css) not in page.csp
    # Changed behind the manifest's back: refused, never served.
    (build / "swagger-ui.css").write_text(css, encoding="utf-8")
    with pytest.raises(swagger_assets.AssetsMismatch):
        docs_bp.build_docs_page(assets_dir=build)
    # Built from another version than the lock pins: refused too.
    manifest["files"]["swagger-ui.css"] = hashlib.sha256(css.encode()).hexdigest()
    manifest["version"] = "0.0.1"
    (build / swagger_assets.MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(swagger_assets.AssetsMismatch, match="lock pins"):
        docs_bp.build_docs_page(assets_dir=build)
    # A manifest the build step did not write: refused as well (a 503 through the route, never a 500).
    (build / swagger_assets.MANIFEST).write_text("{not json")
    with pytest.raises(swagger_assets.AssetsMismatch, match="not a manifest"):
        docs_bp.build_docs_page(assets_dir=build)


def _csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


@pytest.mark.parametrize("state", ["missing", "tampered"])
def test_without_the_build_the_docs_are_a_503_naming_the_step_and_the_api_works(
    tmp_path: Path, azurite: str, state: str
) -> None:
    build = tmp_path / "empty"
    build.mkdir()
    if state == "tampered":
        build = _copy_build(tmp_path)
        with (build / "swagger-ui-bundle.js").open("a") as f:
            f.write("\n;window.injected = 1;")
    env = host_env(azurite, THEMATIQ_SWAGGER_UI_DIR=str(build))
    with HostProcess(env=env) as host:
        api = Api(host.url, env["DEVHOST_FUNCTION_KEY"])
        status, headers, body = api.call("GET", "/api/docs")
        assert status == 503, body
        assert headers["Content-Type"].startswith("application/problem+json")
        assert body["type"].endswith("/docs-not-built") and body["instance"] == "/api/docs"
        assert "scripts/bootstrap" in body["detail"] and "swagger-ui-dist" in body["detail"]
        assert ("do not match" in body["detail"]) == (state == "tampered")
        assert str(tmp_path) not in body["detail"]
        status, _, doc = api.call("GET", "/api/openapi.json")
        assert status == 200 and doc["paths"]
        status, _, _ = api.call("GET", "/api/health", key=False)
        assert status == 200
