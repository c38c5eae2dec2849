"""Browser tests of the dashboard: headless Debian Chromium driven by Python Playwright, against the local host on Azurite.

Playwright's own browser download is never used (it cannot be fetched here): the tests launch the system
``chromium``. Without it they are skipped with the install command, except under CI, where a missing browser
is a failure (.ci/run installs it).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

# The module-scoped host and API client of the end-to-end tests: one local host per test module.
from tests.e2e.conftest import Api, api, env, host  # noqa: F401

#: How long an ``expect(...)`` assertion, an action (click, fill, inner_text) and a navigation wait for the page
#: before they fail. Each returns as soon as its condition holds, so these only bound a test that would fail anyway;
#: Playwright's own defaults (5 s for ``expect``, 30 s for actions and navigations) are what a loaded machine (load
#: 10-18: the host, Azurite and Chromium share 2 cores) can take just to render a polled job page.
EXPECT_TIMEOUT_MS = 30_000
ACTION_TIMEOUT_MS = 60_000

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    exe = shutil.which("chromium")
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed (apt-get install -y chromium); .ci/run should have installed it")
        pytest.skip("chromium is not installed: apt-get update && apt-get install -y chromium")
    try:
        from playwright.sync_api import expect, sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed (pip install -r requirements-dev.txt)")
    expect.set_options(timeout=EXPECT_TIMEOUT_MS)
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1200, "height": 900}, accept_downloads=True)
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    context.set_default_navigation_timeout(ACTION_TIMEOUT_MS)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.errors = errors
    try:
        yield pg
    finally:
        context.close()
    # A CSP violation or a script error is a bug, even when the test passed.
    assert not [e for e in errors if "401" not in e], errors
