"""The dashboard through the local stand-in for API Management (``devhost.gateway``), the host run as in Azure:
the page opens with a subscription key, calls the gateway's path with ``Ocp-Apim-Subscription-Key``, and a
caller the app does not trust sees why instead of being asked for a key again (issue 12)."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from devhost.gateway import Gateway
from devhost.process import HostProcess
from tests.e2e.conftest import host_env

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips
    expect = None

GATEWAY_ID = str(uuid.uuid4())
SUB_KEY = "sub-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def env(azurite: str) -> dict[str, str]:
    # Run as in Azure: no default tenant; only the gateway's identity may name one.
    return host_env(azurite, DEFAULT_TENANT="", TRUSTED_GATEWAY_PRINCIPAL_ID=GATEWAY_ID, WEBSITE_AUTH_ENABLED="True")


@pytest.fixture(scope="module")
def gateway(host: HostProcess, env: dict[str, str]) -> Iterator[Gateway]:
    with Gateway(host.url, env["DEVHOST_FUNCTION_KEY"], GATEWAY_ID, {"t-ui": SUB_KEY}) as gw:
        yield gw


def _submit(gw: Gateway, text: str) -> dict[str, Any]:
    req = urllib.request.Request(
        gw.url + "/jobs", method="POST",
        data=json.dumps({"pipeline": "echo", "params": {}, "input": text}).encode(),
        headers={"Ocp-Apim-Subscription-Key": SUB_KEY, "content-type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert resp.status == 202
        body: dict[str, Any] = json.loads(resp.read())
        assert resp.headers["Location"] == f"{gw.url}/jobs/{body['id']}"
        return body


def test_dashboard_through_the_gateway_with_a_subscription_key(page: Any, gateway: Gateway) -> None:
    job = _submit(gateway, "through the gateway")
    seen: list[tuple[str, str | None]] = []
    page.on("request", lambda r: seen.append((r.url, r.headers.get("ocp-apim-subscription-key"))))
    page.goto(f"{gateway.url}/ui?subscription-key={SUB_KEY}")
    page.wait_for_selector("main h1")
    assert "subscription-key" not in page.url
    assert page.evaluate("sessionStorage.getItem('thematiq.key-kind')") == "apim"
    expect(page.get_by_role("link", name=f"Job {job['id']}")).to_be_visible(timeout=30_000)
    api_calls = [(u, k) for u, k in seen if "/jobs" in u]
    assert api_calls and all(u.startswith(gateway.url + "/jobs") and k == SUB_KEY for u, k in api_calls), api_calls
    page.get_by_role("link", name=f"Job {job['id']}").click()
    expect(page.locator("#job-live")).to_contain_text(re.compile("succeeded"), timeout=60_000)


def test_when_the_app_gets_no_tenant_the_page_says_why_instead_of_asking_for_the_key(
    page: Any, host: HostProcess, env: dict[str, str]
) -> None:
    # A gateway that forwards the caller but names no tenant (a policy that lost its set-header): the app answers
    # 401 problem+json "no tenant", which a new key would not fix. Before issue 12 the page took it for a bad key.
    with Gateway(host.url, env["DEVHOST_FUNCTION_KEY"], GATEWAY_ID, {"t-ui": SUB_KEY}, send_tenant=False) as gw:
        page.goto(f"{gw.url}/ui?subscription-key={SUB_KEY}")
        page.wait_for_selector("main h1")
        alert = page.get_by_role("alert").first
        expect(alert).to_contain_text("does not know your tenant", timeout=30_000)
        expect(alert).to_contain_text("API Management")
        assert not page.locator("#key-dialog").evaluate("d => d.open")
        assert page.evaluate("sessionStorage.getItem('thematiq.key')") == SUB_KEY, "the key was not thrown away"


def test_the_app_itself_refuses_a_function_key_without_the_gateway(host: HostProcess, env: dict[str, str]) -> None:
    # Run as in Azure, the page is a route like the others: a valid function key alone is 401.
    try:
        urllib.request.urlopen(f"{host.url}/api/ui?code={env['DEVHOST_FUNCTION_KEY']}", timeout=30)
    except urllib.error.HTTPError as err:
        assert err.code == 401 and "application/problem+json" in err.headers["Content-Type"]
    else:
        raise AssertionError("the dashboard was served without the gateway")
