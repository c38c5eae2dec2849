"""Webhook scenarios on the ``backend`` fixture (tests.support.backend_fixture: the fake here, Azurite in the twin)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from shared.config.settings import get_settings

SECRET = "whsec-test-default"


@pytest.fixture(autouse=True)
def _webhook_settings(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("WEBHOOK_SECRET", SECRET)
    monkeypatch.setenv("WEBHOOK_ALLOW_PRIVATE", "false")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()
