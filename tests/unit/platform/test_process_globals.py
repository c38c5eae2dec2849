"""Every process-wide default the platform owns is set in one place and reset in one place."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shared import platform as composition
from shared.config.settings import get_settings
from shared.core.jobs import utcnow
from shared.llm import cache, scope_to_job
from shared.llm.client import TokenBudget
from shared.observability.metering import METER
from shared.platform import Platform, reset_process


def test_reset_process_leaves_nothing_of_a_test_behind(platform: Platform, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_MAX_TOKENS_PER_JOB", "1000")
    assert platform.fake is not None
    platform.fake.clock.advance(86_400)
    METER.add("table:insert", 3)
    scope_to_job("t-other", tokens_used=900, token_limit=950)
    assert utcnow() - datetime.now(UTC) > timedelta(hours=23)  # the platform's clock is the process's
    assert TokenBudget.from_settings().remaining == 50 and cache.current_scope() == "t-other"
    settings = get_settings()

    reset_process()

    assert abs(utcnow() - datetime.now(UTC)) < timedelta(minutes=1)
    assert METER.snapshot() == {}
    assert TokenBudget.from_settings().remaining == 1000 and cache.current_scope() == ""
    assert get_settings() is not settings  # read again from the environment
    assert composition.current() is not platform  # the next use builds one from the settings


def test_an_installed_platform_serves_the_app_until_another_is(platform: Platform) -> None:
    other = Platform.in_memory()
    assert composition.current() is platform
    composition.use(other)
    assert composition.current() is other and composition.current().service is other.service
    assert other.service.stores is other.stores and other.worker.stores is other.stores
