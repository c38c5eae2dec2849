"""Count Storage requests by service and operation: each one is a billed transaction.

Every storage client carries :meth:`TransactionMeter.hook` as its response hook,
so ``bench/platform.py`` and the tests can put a number on "transactions per
job". Kept free of SDK imports so that a pipeline process can report its count
without paying for the storage SDKs' import time.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any


class TransactionMeter:
    """Thread-safe count of Storage requests, keyed ``service:operation``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._local = threading.local()

    def answered(self) -> int:
        """How many responses this thread has seen: lets a caller tell whether any try of a call was answered.

        azure-core retries a connection error on every method and then raises the *last*
        error, so "could not connect" at the end does not prove that an earlier try of
        the same write was not answered (and applied).
        """
        return int(getattr(self._local, "answered", 0))

    def hook(self, service: str, response: Any) -> None:
        self._local.answered = self.answered() + 1
        request = response.http_request
        op = _operation(service, request.method, request.url)
        if op == "queue:receive":
            try:
                body = response.http_response.body()
            except Exception:  # noqa: BLE001 - a streamed body is not a receive
                body = b""
            if b"<QueueMessage>" not in body:
                op = "queue:receive-empty"
        with self._lock:
            self._counts[op] += 1

    def add(self, op: str, n: int = 1) -> None:
        with self._lock:
            self._counts[op] += n

    def snapshot(self) -> Counter[str]:
        with self._lock:
            return Counter(self._counts)

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()

    @staticmethod
    def billable(counts: Counter[str]) -> int:
        """Transactions excluding empty polls (which depend on idle time, not on jobs)."""
        return sum(v for k, v in counts.items() if k != "queue:receive-empty")


METER = TransactionMeter()


def _operation(service: str, method: str, url: str) -> str:
    path, _, query = url.partition("?")
    path = path.split("//", 1)[-1]
    if service == "queue":
        if path.endswith("/messages"):
            return {"GET": "queue:receive", "POST": "queue:send", "DELETE": "queue:clear"}.get(
                method, f"queue:{method}"
            )
        if "/messages/" in path:
            return {"DELETE": "queue:delete", "PUT": "queue:update"}.get(method, f"queue:{method}")
        return f"queue:{method.lower()}-{'metadata' if 'comp=metadata' in query else 'queue'}"
    if service == "table":
        if path.endswith("$batch"):
            return "table:batch"
        if method == "GET":
            return "table:get" if "(PartitionKey=" in path else "table:query"
        return f"table:{ {'POST': 'insert', 'PUT': 'update', 'MERGE': 'merge', 'PATCH': 'merge', 'DELETE': 'delete'}.get(method, method) }"
    return f"blob:{method.lower()}"
