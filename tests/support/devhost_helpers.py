"""Helpers for the dev host tests (a uniquely named module: several conftest.py files exist under tests/)."""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

from azure.core.exceptions import ResourceExistsError
from azure.storage.queue import QueueClient

from devhost.process import HostProcess
from tests.support.waiting import wait_until

APPS = Path(__file__).resolve().parent.parent / "e2e" / "devhost" / "apps"
BASIC_APP = APPS / "basic"


def queue_env() -> dict[str, str]:
    """Unique queue names for the basic app, so tests (and reruns) never share queues."""
    s = secrets.token_hex(4)
    return {
        "OK_QUEUE": f"ok-{s}",
        "FAIL_QUEUE": f"fail-{s}",
        "SLOW_QUEUE": f"slow-{s}",
        "OUT_SRC_QUEUE": f"outsrc-{s}",
        "OUT_DST_QUEUE": f"outdst-{s}",
    }


def read_records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def wait_for(predicate: Callable[[], Any], timeout: float = 15.0, interval: float = 0.1, what: str = "") -> Any:
    return wait_until(predicate, timeout, interval, what)


class BasicHost:
    """A running basic-app host plus what tests need to talk to it."""

    def __init__(self, host: HostProcess, env: dict[str, str], record_file: Path, conn: str) -> None:
        self.host = host
        self.env = env
        self.record_file = record_file
        self.conn = conn

    def records(self, fn: str | None = None) -> list[dict[str, Any]]:
        return [r for r in read_records(self.record_file) if fn is None or r.get("fn") == fn]

    def queue(self, setting: str) -> QueueClient:
        client = QueueClient.from_connection_string(self.conn, self.env[setting])
        try:
            client.create_queue()
        except ResourceExistsError:
            pass
        return client


