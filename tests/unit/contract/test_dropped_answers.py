"""A write whose answer is lost (``drop``: applied, then the connection resets) means the same on the fake as on
Azurite: the blob and queue SDKs retry it (``StorageRetryPolicy`` retries any error, a POST too), the tables SDK
does not (azure-core's policy retries no POST or MERGE after a read error).

Review44p: the fake's helpers (``tests/support/faults.py``) raised for every service, so a blob batch delete under
``drop`` failed on the fake while on Azurite the retry came back with every sub-request 404 (and
``BlobStore.delete_prefix`` counts those as deleted), and a dropped queue send failed on the fake while on Azurite
the retry sent the message again. Run on both backends (``tests/integration/contract``).
"""

from __future__ import annotations

import pytest
from azure.core.exceptions import ServiceResponseError

from shared.config.settings import get_settings
from shared.core.errors import StorageUnavailable
from shared.core.messages import JobMessage
from tests.support.backends import Backend

PREFIX = "tenant-d/fe5dcf1cfd2e8b0a0177784c1eb0/"


def _names(b: Backend) -> list[str]:
    container = b.stores.blobs.container  # type: ignore[attr-defined]
    return sorted(p.name for p in container.list_blobs(name_starts_with=PREFIX))


def test_a_blob_batch_delete_whose_answer_is_dropped_is_retried_and_finds_the_blobs_gone(backend: Backend) -> None:
    for i in range(3):
        backend.stores.blobs.put(f"{PREFIX}{i}.json", b"{}")
    rule = backend.faults.arm("blob", "drop", method="POST", count=1)
    assert backend.stores.blobs.delete_prefix(PREFIX) == 3
    assert rule.hits == 1 and _names(backend) == []


def test_a_blob_upload_whose_answer_is_dropped_is_retried(backend: Backend) -> None:
    rule = backend.faults.arm("blob", "drop", method="PUT", count=1)
    backend.stores.blobs.put(f"{PREFIX}result.json", b'{"a":1}')
    assert rule.hits == 1 and backend.stores.blobs.get(f"{PREFIX}result.json") == b'{"a":1}'


def test_a_blob_write_dropped_on_every_try_fails_after_the_sdks_retries(backend: Backend) -> None:
    rule = backend.faults.arm("blob", "drop", method="PUT", count=10)
    with pytest.raises(StorageUnavailable):
        backend.stores.blobs.put(f"{PREFIX}result.json", b'{"a":1}')
    backend.faults.disarm()
    assert rule.hits == 3  # the first try and the SDK's two retries (retry_total=2), each applied
    assert backend.stores.blobs.get(f"{PREFIX}result.json") == b'{"a":1}'


def test_a_queue_send_whose_answer_is_dropped_is_sent_again(backend: Backend) -> None:
    rule = backend.faults.arm("queue", "drop", method="POST", count=1)
    backend.stores.messages.send(JobMessage("tenant-d", "fe5dcf1cfd2e8b0a0177784c1eb0", 1))
    assert rule.hits == 1
    peeked = backend.raw_queue(get_settings().jobs_queue).peek_messages(max_messages=32)
    assert len(list(peeked)) == 2  # the committed send and the SDK's retry: a duplicate, which claims make harmless


def test_a_table_write_whose_answer_is_dropped_is_not_retried(backend: Backend) -> None:
    table = backend.stores.jobs.table  # type: ignore[attr-defined]
    rule = backend.faults.arm("table", "drop", method="POST", count=1)
    with pytest.raises(ServiceResponseError):
        table.create_entity({"PartitionKey": "tenant-d", "RowKey": "dropped", "v": 1})
    assert rule.hits == 1
    assert table.get_entity("tenant-d", "dropped")["v"] == 1  # it committed: only a re-read can tell
