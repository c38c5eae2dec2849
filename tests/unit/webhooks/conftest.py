"""Webhook scenarios on both backends: the core tier's ``backend`` fixture (the fake, Azurite, the fake again)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from shared.config.settings import get_settings
from tests.core.conftest import backend  # noqa: F401 - the two-backend fixture, shared

SECRET = "whsec-test-default"


@pytest.fixture(autouse=True)
def _webhook_settings(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("WEBHOOK_SECRET", SECRET)
    monkeypatch.setenv("WEBHOOK_ALLOW_PRIVATE", "false")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()
