"""Settings that would make the platform work against itself are refused when they are read."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from pydantic import ValidationError

from shared.config.constants import FENCE_FRACTION
from shared.config.settings import Settings, get_settings

Read = Callable[[str, str], Settings]


@pytest.fixture
def settings_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[Read]:
    """Reads the settings with the given heartbeat and stale threshold (the way a host reads them)."""

    def read(heartbeat: str, stale: str) -> Settings:
        monkeypatch.setenv("HEARTBEAT_SECONDS", heartbeat)
        monkeypatch.setenv("HEARTBEAT_STALE_SECONDS", stale)
        get_settings.cache_clear()
        return get_settings()

    yield read
    get_settings.cache_clear()


@pytest.mark.parametrize(("heartbeat", "stale"), [("15", "4"), ("120", "120"), ("80", "120")])
def test_a_heartbeat_at_or_past_the_fence_is_refused_naming_both_settings(
    settings_env: Read, heartbeat: str, stale: str
) -> None:
    """15 s against 4 s is what made an attempt fence itself; 120 against 120 lets the reaper reap live attempts;
    80 against 120 is below the threshold but past the fence (0.6 x 120 = 72 s), so it fences itself too."""
    with pytest.raises(ValidationError) as refused:
        settings_env(heartbeat, stale)
    message = str(refused.value)
    assert "HEARTBEAT_SECONDS" in message and "HEARTBEAT_STALE_SECONDS" in message


def test_a_heartbeat_inside_the_fence_is_accepted(settings_env: Read) -> None:
    s = settings_env("15", "120")
    assert s.heartbeat_seconds < FENCE_FRACTION * s.heartbeat_stale_seconds
    # Just inside the fence.
    assert settings_env("1.19", "2").heartbeat_seconds == 1.19
