"""The ``backend`` fixture: a scenario's storage, the in-memory fake in tests/unit and Azurite in tests/integration.

Which backend a test gets is decided by its tier (``tests/conftest.py``'s ``pytest_generate_tests``): a scenario in
tests/unit runs on the fake (and, if it runs the reaper, again with the reaper's full sweep, the only place the two
ways of finding rows differ); its twin in tests/integration (``tests.support.twin``) runs it on Azurite.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from shared.core import conditional, lifecycle
from shared.core.registry import default_registry
from shared.platform import Platform, reset_process, use
from shared.storage.fake import FakeClock, FakeStorage
from tests.conftest import NO_ACCOUNT, unique_names
from tests.support.backends import Backend, azurite_backend, fake_backend
from tests.support.inprocess import InProcessRunner


@pytest.fixture
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Backend]:
    env = {
        "DEFAULT_TENANT": "local",
        "HEARTBEAT_SECONDS": "0.2",
        "HEARTBEAT_STALE_SECONDS": "2",
        "PROGRESS_MIN_INTERVAL_SECONDS": "0.1",
        "CANCEL_GRACE_SECONDS": "1",
        **unique_names(),
    }
    if request.param == "azurite":
        env["AzureWebJobsStorage"] = request.getfixturevalue("azurite")
    else:
        env["AzureWebJobsStorage"] = NO_ACCOUNT  # nothing may reach a real account from the fast tier
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    reset_process()
    InProcessRunner.executions.clear()
    # One clock for the platform and the fake: staleness is crossed by moving it, not by sleeping.
    clock = FakeClock()
    monkeypatch.setattr(lifecycle, "SEND_RETRY_DELAY", 0.0)
    monkeypatch.setattr(conditional, "AMBIGUOUS_REREAD_DELAYS", (0.0, 0.0))
    b = azurite_backend(env["AzureWebJobsStorage"]) if request.param == "azurite" else fake_backend(FakeStorage(clock))
    b.clock = clock
    # The reaper's two ways of finding rows decide alike: the index on both backends, the sweep on the fake.
    b.reaper_sweep = request.param == "fake-sweep"
    use(Platform(b.stores, default_registry(), runner=InProcessRunner, clock=clock.now, fake=b.fake))
    yield b
    reset_process()
