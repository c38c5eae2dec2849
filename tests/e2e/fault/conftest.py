"""One local cluster (API host + worker host) for the security tests, with a recognisable secret key."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from tests.e2e.conftest import Api
from tests.support.cluster import Cluster

#: Looks like a live secret, so that a leak into the logs is easy to spot.
CANARY_KEY = "sk-live-CANARYKEY-" + secrets.token_hex(12)
CANARY_LLM_KEY = "sk-proj-CANARYLLM-" + secrets.token_hex(12)


@pytest.fixture(scope="module")
def sec(azurite: str) -> Iterator[Cluster]:
    c = Cluster(azurite, 1, {"DEVHOST_FUNCTION_KEY": CANARY_KEY, "LLM_API_KEY": CANARY_LLM_KEY})
    try:
        yield c.start()
    finally:
        c.stop()


@pytest.fixture(scope="module")
def sec_api(sec: Cluster) -> Api:
    return sec.api
