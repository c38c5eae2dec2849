"""The fault proxy itself: transparent at rate 0, "commit then drop" and "refuse" do what they say under the SDKs."""

from __future__ import annotations

import http.client
import os
import secrets
from collections.abc import Iterator

import pytest
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError, ServiceResponseError
from azure.data.tables import TableClient, TableServiceClient, TableTransactionError, UpdateMode
from azure.storage.blob import BlobServiceClient
from azure.storage.blob import ExponentialRetry as BlobRetry
from azure.storage.queue import ExponentialRetry as QueueRetry
from azure.storage.queue import QueueClient

from devhost.faultproxy import FaultProxy, Faults

# Fast SDK retries, so that the refuse tests don't sleep through the default backoff.
TABLE_RETRY = {"retry_total": 2, "retry_backoff_factor": 0.05}


def _storage_retry(cls: type[QueueRetry] | type[BlobRetry]) -> QueueRetry | BlobRetry:
    return cls(initial_backoff=0, increment_base=1, retry_total=1, random_jitter_range=0)


@pytest.fixture
def proxy(azurite: str) -> Iterator[FaultProxy]:
    with FaultProxy(azurite, seed=1) as p:
        yield p


def _table(conn: str, name: str) -> TableClient:
    return TableServiceClient.from_connection_string(conn, **TABLE_RETRY).get_table_client(name)


def test_rate_zero_is_transparent_for_table_queue_and_blob(azurite: str, proxy: FaultProxy) -> None:
    conn = proxy.connection_string
    name = "fp" + secrets.token_hex(4)
    # Table: create, insert, merge (MERGE), upsert replace (PUT), $batch, query, delete.
    TableServiceClient.from_connection_string(conn).create_table(name)
    t = _table(conn, name)
    t.create_entity({"PartitionKey": "p", "RowKey": "a", "n": 1})
    t.update_entity({"PartitionKey": "p", "RowKey": "a", "m": 2}, mode=UpdateMode.MERGE)
    t.upsert_entity({"PartitionKey": "p", "RowKey": "b", "n": 3}, mode=UpdateMode.REPLACE)
    t.submit_transaction([("create", {"PartitionKey": "p", "RowKey": f"c{i}", "n": i}) for i in range(10)])
    with pytest.raises(TableTransactionError):  # a failing batch is answered through the proxy too
        t.submit_transaction([("create", {"PartitionKey": "p", "RowKey": "a"})])
    got = t.get_entity("p", "a")
    assert (got["n"], got["m"]) == (1, 2)
    assert len(list(t.query_entities("PartitionKey eq @p", parameters={"p": "p"}))) == 12
    t.delete_entity("p", "b")
    # What the proxy wrote is what Azurite holds.
    direct = TableClient.from_connection_string(azurite, name)
    assert sorted(e["RowKey"] for e in direct.list_entities()) == ["a"] + [f"c{i}" for i in range(10)]

    # Queue: create, send, receive (GET), update, delete.
    q = QueueClient.from_connection_string(conn, name)
    q.create_queue()
    q.send_message("hello")
    (msg,) = list(q.receive_messages(max_messages=1, visibility_timeout=30))
    assert msg.content == "hello"
    upd = q.update_message(msg, visibility_timeout=1, content="again")
    q.delete_message(msg.id, upd.pop_receipt)
    assert QueueClient.from_connection_string(azurite, name).peek_messages() == []

    # Blob: small and large (multi-block, above the proxy's buffer limit) uploads, download, list, delete.
    svc = BlobServiceClient.from_connection_string(conn, max_single_put_size=4 * 1024 * 1024)
    c = svc.get_container_client(name)
    c.create_container()
    big = os.urandom(9 * 1024 * 1024 + 17)
    c.upload_blob("small.json", b'{"x": 1}')
    c.upload_blob("big.bin", big)
    assert c.download_blob("big.bin").readall() == big
    assert c.download_blob("small.json").readall() == b'{"x": 1}'
    assert sorted(b.name for b in c.list_blobs()) == ["big.bin", "small.json"]
    c.delete_blob("small.json")
    assert c.get_blob_client("big.bin").get_blob_properties().size == len(big)

    counts = proxy.counters()
    for service in ("table", "queue", "blob"):
        assert counts[service].forwarded > 0 and counts[service].reads > 0, proxy.report()
        assert counts[service].dropped == counts[service].refused == counts[service].upstream_errors == 0
    # The SDK sends a merge as PATCH (X-HTTP-Method MERGE only towards Cosmos); a raw MERGE is relayed as well.
    assert {w.method for w in proxy.writes("table")} >= {"POST", "PATCH", "PUT", "DELETE"}
    raw = http.client.HTTPConnection("127.0.0.1", proxy.port("table"), timeout=10)
    raw.request("MERGE", f"/devstoreaccount1/{name}(PartitionKey='p',RowKey='a')", body=b"{}")
    answer = raw.getresponse()
    assert answer.status in (400, 403), answer.status  # Azurite's answer (unsigned), not the proxy's 501
    raw.close()
    print(proxy.report())


def test_commit_then_drop_raises_service_response_error_and_the_entity_exists(azurite: str, proxy: FaultProxy) -> None:
    name = "fp" + secrets.token_hex(4)
    TableClient.from_connection_string(azurite, name).create_table()
    proxy.set_faults("table", drop=1.0)
    t = _table(proxy.connection_string, name)
    with pytest.raises(ServiceResponseError):
        t.create_entity({"PartitionKey": "p", "RowKey": "r", "v": "committed"})
    # azure-core did not retry the POST: one write reached Azurite, and it committed.
    assert proxy.counters()["table"].dropped == 1 and proxy.counters()["table"].forwarded == 0
    assert t.get_entity("p", "r")["v"] == "committed"  # a GET is never faulted
    assert TableClient.from_connection_string(azurite, name).get_entity("p", "r")["v"] == "committed"
    # A MERGE and a $batch are not retried either.
    with pytest.raises(ServiceResponseError):
        t.update_entity({"PartitionKey": "p", "RowKey": "r", "v": "merged"}, mode=UpdateMode.MERGE)
    with pytest.raises(ServiceResponseError):
        t.submit_transaction([("create", {"PartitionKey": "p", "RowKey": "b1"})])
    assert proxy.counters()["table"].dropped == 3
    assert t.get_entity("p", "r")["v"] == "merged" and t.get_entity("p", "b1")
    # Healed: the same client works again.
    proxy.heal()
    t.create_entity({"PartitionKey": "p", "RowKey": "after"})
    assert proxy.counters()["table"].forwarded == 1


def test_refuse_answers_503_server_busy_and_nothing_is_written(azurite: str, proxy: FaultProxy) -> None:
    name = "fp" + secrets.token_hex(4)
    TableClient.from_connection_string(azurite, name).create_table()
    proxy.set_faults("table", refuse=1.0)
    t = _table(proxy.connection_string, name)
    with pytest.raises(HttpResponseError) as err:
        t.create_entity({"PartitionKey": "p", "RowKey": "r"})
    assert err.value.status_code == 503, err.value
    assert err.value.response is not None and err.value.response.headers["x-ms-error-code"] == "ServerBusy"
    # The SDK retried the POST after the 503 (initial try + retry_total), and none of them was forwarded.
    assert proxy.counters()["table"].refused == 1 + TABLE_RETRY["retry_total"]
    assert proxy.counters()["table"].forwarded == 0
    with pytest.raises(ResourceNotFoundError):
        TableClient.from_connection_string(azurite, name).get_entity("p", "r")


def test_queue_and_blob_writes_fault_too(azurite: str, proxy: FaultProxy) -> None:
    name = "fp" + secrets.token_hex(4)
    direct_q = QueueClient.from_connection_string(azurite, name)
    direct_q.create_queue()
    direct_q.send_message("m")
    q = QueueClient.from_connection_string(proxy.connection_string, name, retry_policy=_storage_retry(QueueRetry))
    (msg,) = list(q.receive_messages(max_messages=1, visibility_timeout=30))  # receive is a GET: never faulted
    proxy.set_faults("queue", drop=1.0)
    # The storage SDK does retry a DELETE after a dropped answer; the retry finds the message gone.
    with pytest.raises((ServiceResponseError, ResourceNotFoundError)):
        q.delete_message(msg.id, msg.pop_receipt)
    assert proxy.counters()["queue"].dropped >= 1
    assert direct_q.peek_messages() == []

    BlobServiceClient.from_connection_string(azurite).create_container(name)
    proxy.set_faults("blob", refuse=1.0)
    b = BlobServiceClient.from_connection_string(proxy.connection_string, retry_policy=_storage_retry(BlobRetry))
    with pytest.raises(HttpResponseError) as err:
        b.get_blob_client(name, "x.json").upload_blob(b"{}")
    assert err.value.status_code == 503 and err.value.error_code == "ServerBusy"
    assert not BlobServiceClient.from_connection_string(azurite).get_blob_client(name, "x.json").exists()


def test_same_seed_same_decisions(azurite: str) -> None:
    name = "fp" + secrets.token_hex(4)
    TableClient.from_connection_string(azurite, name).create_table()
    runs = []
    for _ in range(2):
        with FaultProxy(azurite, {"table": Faults(drop=0.3, refuse=0.2)}, seed=42) as p:
            t = TableServiceClient.from_connection_string(p.connection_string, retry_total=0).get_table_client(name)
            for i in range(20):
                try:
                    t.upsert_entity({"PartitionKey": "p", "RowKey": str(i)})
                except (ServiceResponseError, HttpResponseError):
                    pass
            runs.append([w.action for w in p.writes("table")])
    assert runs[0] == runs[1] and {"drop", "refuse", "forward"} <= set(runs[0]), runs


def test_every_outcome_is_counted_before_the_client_has_its_answer(azurite: str, proxy: FaultProxy) -> None:
    """The CI run of 608aee1 read ``refused == 2`` for 3 refused tries: the proxy counted after answering, so a
    client (and a test) could see the 503 before the count. Raw requests, no SDK retries: after each answer the
    count must already include it."""
    raw = http.client.HTTPConnection("127.0.0.1", proxy.port("table"), timeout=10)
    try:
        for faults, field in (({"refuse": 1.0}, "refused"), ({"refuse": 0.0}, "forwarded")):
            proxy.set_faults("table", **faults)
            for i in range(150):
                before = getattr(proxy.counters()["table"], field)
                raw.request("POST", "/devstoreaccount1/Tables", body=b'{"TableName":"cnt%d"}' % i,
                            headers={"Content-Type": "application/json", "Accept": "application/json;odata=nometadata",
                                     "x-ms-version": "2019-02-02"})
                raw.getresponse().read()
                assert getattr(proxy.counters()["table"], field) == before + 1, (field, i)
    finally:
        raw.close()
