"""The app reads host.json as the host runs it: with the ``AzureFunctionsJobHost__…`` app settings applied.

Azure's Functions host (and devhost, which follows it) lets an app setting override any host.json value, and
docs/architecture.md tells operators to change ``batchSize`` and ``functionTimeout`` that way. The app counts
deliveries against ``maxDequeueCount`` (which delivery is the last: fail the job there, never release it into a
poison queue) and caps an attempt below ``functionTimeout``. Until review42 it read host.json alone, so with
``AzureFunctionsJobHost__extensions__queues__maxDequeueCount=3`` the host poisoned a message after 3 deliveries
while the worker waited for a 5th that never came: a worker failing after its claim released the job on the
last delivery, the reaper re-sent it from the poison queue, and the cycle never ended.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

import pytest

from devhost import config as devhost_config
from shared.config import hostconfig
from shared.core.jobs import Status
from shared.runtime.worker import Worker
from tests.support.backends import Backend
from tests.support.scenarios import job, submit, worker


@pytest.fixture
def overridden(monkeypatch: pytest.MonkeyPatch) -> Any:
    # Key case differs from host.json's on purpose: the host's configuration is case-insensitive.
    monkeypatch.setenv("AzureFunctionsJobHost__extensions__queues__MaxDequeueCount", "3")
    monkeypatch.setenv("AzureFunctionsJobHost__functionTimeout", "00:10:00")
    hostconfig.host_config.cache_clear()
    yield
    monkeypatch.undo()
    hostconfig.host_config.cache_clear()


def test_the_app_and_the_host_read_the_same_overridden_host_json(overridden: Any) -> None:
    host = devhost_config.load(hostconfig.APP_ROOT)
    app = hostconfig.host_config()
    assert host.queues.max_dequeue_count == app.max_dequeue_count == 3
    assert host.function_timeout == 600 and app.function_timeout == timedelta(minutes=10)
    assert hostconfig.attempt_timeout(None, 1500) == 540  # below the host's 10 min, not the file's 30


def test_without_overrides_host_json_is_read_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith("AzureFunctionsJobHost__")]:
        monkeypatch.delenv(name)
    hostconfig.host_config.cache_clear()
    assert hostconfig.host_config() == hostconfig.HostConfig(5, timedelta(minutes=30))
    hostconfig.host_config.cache_clear()


def test_the_overridden_last_delivery_fails_the_job_instead_of_releasing_it(
    backend: Backend, overridden: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    j = submit(backend).job
    assert j.max_attempts <= 3  # attempts are capped by the deliveries the host allows

    def broken(self: Worker, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the worker itself failed after its claim")

    monkeypatch.setattr(Worker, "_attempt", broken)
    # The host's 3rd delivery is its last: past it the message goes to the poison queue without an invocation.
    out = backend.deliver(lambda text, _n: worker(backend).handle(text, 3))
    assert out == "error:RuntimeError", out
    row = job(backend, j.id)
    assert row.status == Status.FAILED, f"{row.status}: released on the host's last delivery"
    assert row.error is not None and row.error.type == "PoisonMessage"
