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
from shared.platform import Platform, reset_process, use

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
    env = {"AzureWebJobsStorage": azurite, "DEFAULT_TENANT": "local", **unique_names()}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    reset_process()  # the app's platform is built again, from these settings, on first use
    yield env
    reset_process()


#: A connection string whose every endpoint is a closed port: nothing may reach a real account from the fast tier.
NO_ACCOUNT = (
    "DefaultEndpointsProtocol=http;AccountName=none;AccountKey=bm9uZQ==;TableEndpoint=http://127.0.0.1:9/none;"
    "QueueEndpoint=http://127.0.0.1:9/none;BlobEndpoint=http://127.0.0.1:9/none"
)


@pytest.fixture
def platform(monkeypatch: pytest.MonkeyPatch) -> Iterator[Platform]:
    """A fresh platform on the in-memory fake, installed as the app's: the one fixture a fast test needs.

    Every process-wide default starts as in a fresh process (``shared.platform.reset_process``) and is reset
    again afterwards, so no test leaks a clock, a meter count, a budget or an LLM scope into the next.
    """
    for k, v in {"AzureWebJobsStorage": NO_ACCOUNT, "DEFAULT_TENANT": "local", **unique_names()}.items():
        monkeypatch.setenv(k, v)
    reset_process()
    p = Platform.in_memory()
    use(p)
    yield p
    reset_process()
