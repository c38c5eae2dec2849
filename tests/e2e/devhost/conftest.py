"""Fixtures for the dev host tests: the throwaway ``apps/basic`` app served by a real host on Azurite."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from devhost.process import HostProcess
from tests.support.devhost_helpers import BASIC_APP, BasicHost, queue_env


@pytest.fixture(scope="module")
def basic(azurite: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BasicHost]:
    record = tmp_path_factory.mktemp("records") / "records.jsonl"
    env = {
        "AzureWebJobsStorage": azurite,
        "RECORD_FILE": str(record),
        "OVERRIDDEN": "env-value",
        "AzureFunctionsWebHost__hostid": f"basic-{secrets.token_hex(4)}",
        **queue_env(),
    }
    host = HostProcess(BASIC_APP, env=env, args=["--no-timer"]).start()
    try:
        yield BasicHost(host, env, record, azurite)
    finally:
        host.stop()
