"""The two storage backends the same scenarios run on: the in-memory fake and real Azurite.

Both give a :class:`shared.core.ports.Stores` whose writes obey the same armed
:class:`tests.support.faults.Faults`, and a tiny stand-in for the Functions host's
queue trigger (:meth:`Backend.deliver`): receive, call the handler, delete on
success, make the message visible again on failure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from azure.storage.blob import ContainerClient
from azure.storage.queue import LinearRetry, QueueClient, TextBase64EncodePolicy

from shared.config.settings import get_settings
from shared.core.ports import Stores
from shared.observability.metering import METER
from shared.storage.blobs import BlobStore
from shared.storage.chunk_store import ChunkStore
from shared.storage.fake import FakeStorage
from shared.storage.job_store import JobStore
from shared.storage.queues import Queues

# Production's table client (the SDK's, with a cheaper $batch), so the faults hit the $batch production sends.
from shared.storage.tables import TableClient
from tests.support.faults import Faults, FaultTransport, faulty


@dataclass
class Backend:
    name: str
    stores: Stores
    faults: Faults
    #: A queue client by name that is NOT subject to faults (the host's own receive path).
    raw_queue: Callable[[str], Any]
    #: The platform's clock in the scenario (``shared.core.jobs.set_clock``), if the test moves time.
    clock: Any = None
    #: How the scenario's reaper finds rows: False the active-jobs index (every run in production),
    #: True the full cross-partition sweep (a process's first run, then daily).
    reaper_sweep: bool = False
    #: The in-memory storage behind a fake backend (None on Azurite), for what only the fake can stage.
    fake: FakeStorage | None = None

    def deliver(self, handler: Callable[[str, int], str], queue: str | None = None) -> str | None:
        """Deliver one message the way the Functions host does; returns the handler's outcome or the error's name."""
        client = self.raw_queue(queue or get_settings().jobs_queue)
        messages = list(client.receive_messages(messages_per_page=1, max_messages=1, visibility_timeout=60))
        if not messages:
            return None
        msg = messages[0]
        text = _decode(msg.content)
        try:
            outcome = handler(text, msg.dequeue_count)
        except Exception as err:
            # By id, not the message object: the SDK would re-encode an object's content.
            client.update_message(msg.id, pop_receipt=msg.pop_receipt, visibility_timeout=0)
            return f"error:{type(err).__name__}"
        client.delete_message(msg, pop_receipt=msg.pop_receipt)
        return outcome

    def ops(self) -> Counter[str]:
        """Storage requests so far, keyed ``table:merge``, ``queue:send``...: the fake's own count, or on Azurite the
        meter the clients' response hook feeds. The fake counts the host's ``raw_queue`` too: take the difference
        around the call you count, not around :meth:`deliver`."""
        return self.fake.ops() if self.fake is not None else METER.snapshot()

    def peek(self, queue: str | None = None) -> list[str]:
        """The texts of a queue's visible messages (at most 32), decoded as the host decodes them."""
        client = self.raw_queue(queue or get_settings().jobs_queue)
        return [_decode(m.content) for m in client.peek_messages(max_messages=32)]

    def depth(self, queue: str | None = None) -> int:
        client = self.raw_queue(queue or get_settings().jobs_queue)
        return len(list(client.peek_messages(max_messages=32)))


def _decode(content: Any) -> str:
    import base64

    text = content.decode() if isinstance(content, bytes) else str(content)
    try:
        return base64.b64decode(text, validate=True).decode()
    except ValueError:
        return text


def fake_backend(storage: FakeStorage | None = None) -> Backend:
    fake = storage or FakeStorage()
    faults = Faults()
    s = get_settings()
    stores = Stores(
        jobs=JobStore(table=faulty(fake.table(s.jobs_table), "table", faults)),
        chunks=ChunkStore(table=faulty(fake.table(s.jobs_table), "table", faults)),
        messages=Queues(queue_for=lambda name: faulty(fake.queue(name or s.jobs_queue), "queue", faults)),
        blobs=BlobStore(container=faulty(fake.container(s.results_container), "blob", faults)),
    )
    return Backend("fake", stores, faults, lambda name: fake.queue(name), fake=fake)


def azurite_backend(connection_string: str) -> Backend:
    faults = Faults()
    s = get_settings()
    # The production clients' retry counts (shared.storage.connections), with short backoffs:
    # the SDK's retry semantics are what matters here, not its pauses.
    kw: dict[str, Any] = {"connection_timeout": 5, "read_timeout": 30}
    hooks = {s_: {"raw_response_hook": partial(METER.hook, s_)} for s_ in ("table", "queue", "blob")}
    storage_retry = {"retry_policy": LinearRetry(backoff=0.05, random_jitter_range=0.01, retry_total=2)}
    table = TableClient.from_connection_string(
        connection_string, s.jobs_table, transport=FaultTransport(faults, "table"), retry_total=2, retry_backoff_factor=0.05,
        **kw, **hooks["table"]
    )
    table_service_ensure(connection_string, s.jobs_table)
    queues: dict[str, QueueClient] = {}

    def queue_for(name: str | None) -> QueueClient:
        name = name or s.jobs_queue
        if name not in queues:
            q = QueueClient.from_connection_string(
                connection_string, name, transport=FaultTransport(faults, "queue"),
                message_encode_policy=TextBase64EncodePolicy(), **kw, **storage_retry, **hooks["queue"],
            )
            _ensure(q.create_queue)
            queues[name] = q
        return queues[name]

    container = ContainerClient.from_connection_string(
        connection_string, s.results_container, transport=FaultTransport(faults, "blob"), **kw, **storage_retry,
        **hooks["blob"],
    )
    _ensure(container.create_container)
    raw: dict[str, QueueClient] = {}

    def raw_queue(name: str) -> QueueClient:
        if name not in raw:
            q = QueueClient.from_connection_string(connection_string, name)
            _ensure(q.create_queue)
            raw[name] = q
        return raw[name]

    stores = Stores(jobs=JobStore(table=table), chunks=ChunkStore(table=table), messages=Queues(queue_for=queue_for),
                    blobs=BlobStore(container=container))
    return Backend("azurite", stores, faults, raw_queue)


def table_service_ensure(connection_string: str, name: str) -> None:
    from azure.data.tables import TableServiceClient

    TableServiceClient.from_connection_string(connection_string).create_table_if_not_exists(name)


def _ensure(create: Callable[[], Any]) -> None:
    from azure.core.exceptions import ResourceExistsError

    try:
        create()
    except ResourceExistsError:
        pass
