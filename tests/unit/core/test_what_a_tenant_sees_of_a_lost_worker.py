"""A job whose worker died: its error tells the tenant what happened, never which host or process ran it.

Runs on the fake here and on Azurite in its twin (tests/integration/core/…_on_azurite.py).
"""

from __future__ import annotations

import json

import pytest

from shared.api import views
from shared.config.settings import get_settings
from shared.core.jobs import Status
from shared.core.lifecycle import Lifecycle
from tests.support.backends import Backend
from tests.support.scenarios import TENANT, reaper, service, submit


@pytest.mark.parametrize("max_attempts", [1, 3])
def test_the_error_of_a_reaped_attempt_names_no_worker(backend: Backend, max_attempts: int) -> None:
    """The reaper's WorkerLost error used to say "(worker <host>:<pid>:<token> presumed dead)": the claim's owner, so
    every tenant whose job outlived a worker read the instance's host name and the worker's process id in
    ``GET /api/jobs/{id}``, which otherwise shows no storage or host detail. The owner goes to the log only."""
    j = submit(backend).job
    life = Lifecycle(backend.stores)
    row = backend.stores.jobs.get(TENANT, j.id, with_input=True)
    if max_attempts != row.max_attempts:
        row = life._apply(row, "test", lambda r: {"max_attempts": max_attempts}).row  # a one-attempt job
    claimed = life.claim(row, 1)
    assert claimed.applied and claimed.row.owner
    owner = claimed.row.owner
    backend.clock.advance(get_settings().heartbeat_stale_seconds + 0.5)
    reaper(backend).run()

    seen = service(backend).get(TENANT, j.id)
    assert seen.status == (Status.FAILED if max_attempts == 1 else Status.RETRYING)
    assert seen.error is not None and seen.error.type == "WorkerLost"
    body = json.dumps(views.public(seen, "/api"))
    host_and_pid = owner.rsplit(":", 1)[0]
    for part in (owner, host_and_pid):
        assert part not in body, f"{part!r} (of the owner {owner!r}) is shown to the tenant: {seen.error.message}"
    assert "attempt 1 stopped sending heartbeats" in seen.error.message
