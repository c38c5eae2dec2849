"""Shared fixtures: a real Azurite for the whole session and unique storage names per test.

Set ``THEMATIQ_TEST_STORAGE`` to a connection string to reuse a running
Azurite (``scripts/test`` does); otherwise a private instance is started on
free ports and removed at the end.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from devhost.azurite import Azurite

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def azurite() -> Iterator[str]:
    """Connection string of a running Azurite."""
    existing = os.environ.get("THEMATIQ_TEST_STORAGE")
    if existing:
        yield existing
        return
    az = Azurite.private().start()
    try:
        yield az.connection_string
    finally:
        az.close()


def unique_names() -> dict[str, str]:
    """Settings of a deployment of its own: storage names no other test uses, and a host id.

    Tests share one Azurite, the way several function apps can share one storage
    account. Each needs its own host id too: timer triggers are singletons per
    host id (a blob lease), so hosts of another test's "app" that are still
    running would otherwise hold the reaper's lock for the whole session.
    """
    suffix = secrets.token_hex(4)
    return {
        "AzureFunctionsWebHost__hostid": f"thematiq-{suffix}",
        "JOBS_TABLE": f"jobs{suffix}",
        "JOBS_QUEUE": f"jobs-{suffix}",
        "CHUNKS_QUEUE": f"chunks-{suffix}",
        "RESULTS_CONTAINER": f"results-{suffix}",
    }


@pytest.fixture
def storage_env(azurite: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """Point this process's settings at Azurite with fresh names; yields the env that was set."""
    from shared.config import settings
    from shared.storage import connections

    env = {"AzureWebJobsStorage": azurite, "DEFAULT_TENANT": "local", **unique_names()}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    settings.get_settings.cache_clear()
    connections.reset_clients()
    yield env
    settings.get_settings.cache_clear()
    connections.reset_clients()
