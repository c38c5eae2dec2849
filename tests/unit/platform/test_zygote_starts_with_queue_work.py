"""The attempt zygote starts at an instance's first queue invocation, not when the app is imported.

Review44p: ``blueprints/worker.py`` started it at import in every worker process, so an instance that serves only
HTTP (Flex Consumption scales the HTTP functions on instances of their own) also imported numpy and the pipelines
in a zygote and kept it (150-250 MB). Now building the job or chunk worker (the first queue invocation) starts it,
and an attempt arriving before it is ready runs spawned instead of waiting (tests/integration/prefork).
"""

from __future__ import annotations

import importlib
import sys
import types

import pytest

from shared import platform as platform_mod
from shared.core.registry import Registry
from shared.runtime import prefork
from shared.storage.assembly import memory_stores
from shared.storage.fake import FakeStorage


@pytest.fixture
def starts(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Every zygote start asked for (``spawn_meanwhile`` of each), none really made; a platform whose attempts fork."""
    seen: list[bool] = []
    monkeypatch.setattr(prefork, "prewarm", lambda *, spawn_meanwhile=False: seen.append(spawn_meanwhile))
    monkeypatch.setattr(prefork, "fork_supported", lambda: True)
    monkeypatch.setenv("ATTEMPT_PROCESS", "fork")
    platform_mod.reset_process()
    platform_mod.use(platform_mod.Platform(stores=memory_stores(FakeStorage()), registry=Registry()))
    yield seen
    platform_mod.reset_process()


def test_importing_the_app_in_a_worker_process_starts_no_zygote(
    starts: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "azure_functions_runtime", types.ModuleType("azure_functions_runtime"))
    import blueprints.worker

    importlib.reload(blueprints.worker)  # as the runtime's indexing imports it
    assert starts == []


@pytest.mark.parametrize("which", ["worker", "chunk_worker"])
def test_the_first_queue_invocation_starts_it_with_spawned_attempts_meanwhile(starts: list[bool], which: str) -> None:
    getattr(platform_mod.current(), which)
    assert starts and starts[0] is True
    getattr(platform_mod.current(), which)  # built once: no second start
    assert len([s for s in starts if s]) == 1


def test_an_http_only_instance_never_starts_one(starts: list[bool]) -> None:
    p = platform_mod.current()
    assert p.service is not None and p.webhook_secrets is not None and p.reaper() is not None
    assert starts == []
