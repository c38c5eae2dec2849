"""The fake storage (shared.storage.fake) answers like Azurite: one set of steps, two backends.

Every test runs against real SDK clients on Azurite and against the in-memory
fake, and asserts the same observable answers: exception classes, status and
error codes, value types, ETag behaviour, queue visibility and pop receipts,
blob overwrite and lease rules. Where Azurite differs from the real service the
fake follows Azurite; those places are commented.
"""

from __future__ import annotations

import base64
import secrets
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import pytest
from azure.core import MatchConditions
from azure.core.exceptions import HttpResponseError, ResourceExistsError, ResourceModifiedError, ResourceNotFoundError
from azure.data.tables import EdmType, EntityProperty, TableServiceClient, TableTransactionError, UpdateMode
from azure.storage.blob import BlobLeaseClient, BlobServiceClient, ContentSettings, PartialBatchErrorException
from azure.storage.queue import QueueServiceClient, TextBase64EncodePolicy

from shared.storage.fake import FakeBlobLease, FakeClock, FakeStorage
from shared.storage.tables import TableServiceClient as TablesWithCheapBatch

try:  # the module moves during the shared/ restructuring
    from shared.observability.metering import TransactionMeter
except ImportError:  # pragma: no cover
    from shared.metering import TransactionMeter  # type: ignore[no-redef]


@dataclass
class Backend:
    name: str
    table: Callable[[], Any]  # a new, created table
    queue: Callable[[], Any]  # a new, created queue, base64-encoding like shared.connections
    raw_queue: Callable[[str], Any]  # a client without encode policy on an existing queue
    container: Callable[[], Any]  # a new, created container
    lease: Callable[[Any, str], Any]  # a lease client for a blob client and lease id
    ops: Callable[[], Counter[str]] = field(default=Counter)  # requests so far, keyed like shared metering
    reset_ops: Callable[[], None] = field(default=lambda: None)
    clock: FakeClock | None = None

    def wait(self, seconds: float) -> None:
        """Let time pass: the fake's clock moves, Azurite needs a real sleep."""
        if self.clock is not None:
            self.clock.advance(seconds)
        else:
            time.sleep(seconds)


def _name(prefix: str) -> str:
    return prefix + secrets.token_hex(5)


def _azurite_backend(conn: str, tables_cls: type[TableServiceClient] = TablesWithCheapBatch) -> Backend:
    # The table clients production uses (shared.storage.tables: the SDK's, with a cheaper $batch);
    # tests/integration/contract/test_batch_client.py runs the table cases on the SDK's own client too.
    # The response hook that shared.storage.connections puts on every client: one count per HTTP request.
    meter = TransactionMeter()

    def hook(service: str) -> dict[str, Any]:
        return {"raw_response_hook": partial(meter.hook, service)}

    tables = tables_cls.from_connection_string(conn, **hook("table"))
    queues = QueueServiceClient.from_connection_string(
        conn, message_encode_policy=TextBase64EncodePolicy(), **hook("queue")
    )
    blobs = BlobServiceClient.from_connection_string(conn, **hook("blob"))

    def queue() -> Any:
        q = queues.get_queue_client(_name("q"), message_encode_policy=TextBase64EncodePolicy())
        q.create_queue()
        return q

    def container() -> Any:
        c = blobs.get_container_client(_name("c"))
        c.create_container()
        return c

    return Backend(
        "azurite" if tables_cls is TablesWithCheapBatch else "azurite-sdk",
        table=lambda: tables.create_table(_name("t")),
        queue=queue,
        raw_queue=lambda name: QueueServiceClient.from_connection_string(conn, **hook("queue")).get_queue_client(name),
        container=container,
        lease=lambda blob, lease_id: BlobLeaseClient(blob, lease_id=lease_id),
        ops=meter.snapshot,
        reset_ops=meter.reset,
    )


def _fake_backend() -> Backend:
    storage = FakeStorage(FakeClock())
    return Backend(
        "fake",
        table=lambda: storage.table(_name("t")),
        queue=lambda: storage.queue(_name("q")),
        raw_queue=lambda name: storage.raw_queue(name),
        container=lambda: storage.container(_name("c")),
        lease=lambda blob, lease_id: FakeBlobLease(blob, lease_id),
        ops=storage.ops,
        reset_ops=storage.reset_ops,
        clock=storage.clock,
    )


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    if request.param == "azurite":
        yield _azurite_backend(request.getfixturevalue("azurite"))
    else:
        yield _fake_backend()


def _status(exc: pytest.ExceptionInfo[Any]) -> tuple[int | None, str | None]:
    code = getattr(exc.value, "error_code", None)
    return exc.value.status_code, None if code is None else str(getattr(code, "value", code))


# --------------------------------------------------------------------------- tables


def test_duplicate_insert_is_409_without_error_code(backend: Backend) -> None:
    t = backend.table()
    t.create_entity({"PartitionKey": "p", "RowKey": "r"})
    with pytest.raises(ResourceExistsError) as exc:
        t.create_entity({"PartitionKey": "p", "RowKey": "r", "x": 1})
    assert exc.value.status_code == 409
    assert getattr(exc.value, "error_code", None) is None  # check the status code, not the error code
    assert dict(t.get_entity("p", "r")) == {"PartitionKey": "p", "RowKey": "r"}


def test_an_insert_without_the_echo_still_answers_its_etag(backend: Backend) -> None:
    """``Prefer: return-no-content`` (the submission's insert): 204, no entity echoed, and the ETag a
    conditional write on it needs; a duplicate is still 409."""
    t = backend.table()
    meta = t.create_entity({"PartitionKey": "p", "RowKey": "r", "v": 1}, response_preference="return-no-content")
    assert meta["etag"] == t.get_entity("p", "r").metadata["etag"]
    assert meta.get("content") is None
    t.update_entity({"PartitionKey": "p", "RowKey": "r", "v": 2}, etag=meta["etag"],
                    match_condition=MatchConditions.IfNotModified)
    with pytest.raises(ResourceExistsError) as exc:
        t.create_entity({"PartitionKey": "p", "RowKey": "r"}, response_preference="return-no-content")
    assert exc.value.status_code == 409


def test_stale_etag_update_and_delete_are_412(backend: Backend) -> None:
    t = backend.table()
    first = t.create_entity({"PartitionKey": "p", "RowKey": "r", "v": 1})["etag"]
    cond = {"match_condition": MatchConditions.IfNotModified}
    second = t.update_entity({"PartitionKey": "p", "RowKey": "r", "v": 2}, etag=first, **cond)["etag"]
    assert second != first
    with pytest.raises(ResourceModifiedError) as exc:
        t.update_entity({"PartitionKey": "p", "RowKey": "r", "v": 3}, mode=UpdateMode.MERGE, etag=first, **cond)
    assert _status(exc) == (412, "UpdateConditionNotSatisfied")
    with pytest.raises(ResourceModifiedError) as exc:
        t.delete_entity("p", "r", etag=first, **cond)
    assert _status(exc) == (412, "UpdateConditionNotSatisfied")
    assert t.get_entity("p", "r")["v"] == 2
    # The ETag of a read entity works as well (the SDK takes it from entity.metadata).
    read = t.get_entity("p", "r")
    read["v"] = 4
    t.update_entity(read, match_condition=MatchConditions.IfNotModified)
    t.delete_entity("p", "r", etag=t.get_entity("p", "r").metadata["etag"], **cond)
    with pytest.raises(ResourceNotFoundError) as exc:
        t.get_entity("p", "r")
    assert _status(exc) == (404, "ResourceNotFound")


def test_an_upsert_between_a_read_and_a_conditional_delete_wins_as_the_busy_tenants_need(backend: Backend) -> None:
    """The busy tenants (shared.core.lifecycle.Lifecycle.idle_tenant): the reaper deletes a mark on the ETag it read;
    a writer's upsert after that read must make the delete a 412, and one after the delete must write the row again.
    The index run reads the marks as the range from ``~`` on, which holds no tenant row."""
    t = backend.table()
    mark = {"PartitionKey": "~tenants", "RowKey": "~busy-a"}
    cond = {"match_condition": MatchConditions.IfNotModified}
    t.upsert_entity({"PartitionKey": "~tenants", "RowKey": "a", "kind": "tenant"})
    t.upsert_entity(mark | {"kind": "busy"}, mode=UpdateMode.MERGE)
    read = t.get_entity("~tenants", "~busy-a").metadata["etag"]
    t.upsert_entity(mark | {"kind": "busy"}, mode=UpdateMode.MERGE)  # the writer's mark, after the reaper's read
    with pytest.raises(ResourceModifiedError) as exc:
        t.delete_entity("~tenants", "~busy-a", etag=read, **cond)
    assert _status(exc) == (412, "UpdateConditionNotSatisfied")
    fresh = t.get_entity("~tenants", "~busy-a").metadata["etag"]
    t.delete_entity("~tenants", "~busy-a", etag=fresh, **cond)
    t.delete_entity("~tenants", "~busy-a", etag=fresh, **cond)  # a retry of a delete that committed: no error
    t.upsert_entity(mark | {"kind": "busy"}, mode=UpdateMode.MERGE)  # a mark after the delete writes it again
    rows = t.query_entities("PartitionKey eq @pk and RowKey ge @lo", parameters={"pk": "~tenants", "lo": "~"})
    assert [e["RowKey"] for e in rows] == ["~busy-a"]


def test_etag_changes_on_every_write(backend: Backend) -> None:
    t = backend.table()
    key = {"PartitionKey": "p", "RowKey": "r"}
    etags = [t.create_entity(key | {"a": 1})["etag"]]
    etags.append(t.update_entity(key | {"a": 1})["etag"])  # same values: still a new ETag
    etags.append(t.update_entity(key | {"b": 2}, mode=UpdateMode.REPLACE)["etag"])
    etags.append(t.upsert_entity(key | {"c": 3})["etag"])
    etags.append(t.upsert_entity(key | {"c": 3}, mode=UpdateMode.REPLACE)["etag"])
    assert len(set(etags)) == len(etags)
    assert all(e.startswith("W/\"datetime'") for e in etags)
    entity = t.get_entity("p", "r")
    assert entity.metadata["etag"] == etags[-1]
    assert isinstance(entity.metadata["timestamp"], datetime)
    assert entity.metadata["timestamp"].tzinfo is not None


def test_merge_keeps_other_properties_replace_drops_them(backend: Backend) -> None:
    t = backend.table()
    key = {"PartitionKey": "p", "RowKey": "r"}
    t.create_entity(key | {"a": 1, "b": "x"})
    t.update_entity(key | {"b": "y", "c": True}, mode=UpdateMode.MERGE)
    assert dict(t.get_entity("p", "r")) == key | {"a": 1, "b": "y", "c": True}
    t.update_entity(key | {"d": 2.5}, mode=UpdateMode.REPLACE)
    assert dict(t.get_entity("p", "r")) == key | {"d": 2.5}
    t.upsert_entity(key | {"e": "z"})  # upsert defaults to MERGE
    assert dict(t.get_entity("p", "r")) == key | {"d": 2.5, "e": "z"}
    t.upsert_entity(key | {"f": 1}, mode=UpdateMode.REPLACE)
    assert dict(t.get_entity("p", "r")) == key | {"f": 1}
    t.update_entity(key | {"f": None, "g": 1})  # None is not sent: MERGE cannot remove a property
    assert dict(t.get_entity("p", "r")) == key | {"f": 1, "g": 1}


def test_unconditional_writes_and_missing_entities(backend: Backend) -> None:
    t = backend.table()
    key = {"PartitionKey": "p", "RowKey": "r"}
    with pytest.raises(ResourceNotFoundError) as exc:
        t.update_entity(key | {"a": 1})
    assert _status(exc) == (404, "ResourceNotFound")
    with pytest.raises(ResourceNotFoundError):
        t.update_entity(key | {"a": 1}, etag='W/"x"', match_condition=MatchConditions.IfNotModified)
    t.upsert_entity(key | {"a": 1})
    t.update_entity(key | {"a": 2})  # no ETag: last writer wins
    assert t.get_entity("p", "r")["a"] == 2
    with pytest.raises(ValueError, match="Unconditional"):
        t.update_entity(key | {"a": 3}, etag='W/"x"')  # an ETag needs IfNotModified (checked by the SDK)
    with pytest.raises(ValueError):
        t.update_entity(key | {"a": 3}, match_condition=MatchConditions.IfNotModified)
    t.delete_entity("p", "nope")  # the SDK swallows 404 on delete
    t.delete_entity("p", "nope", etag='W/"x"', match_condition=MatchConditions.IfNotModified)
    t.delete_entity(key)
    with pytest.raises(ResourceNotFoundError):
        t.get_entity("p", "r")


def test_missing_table_is_404(backend: Backend) -> None:
    t = backend.table()
    t.delete_table()
    t.delete_table()  # the SDK swallows 404
    with pytest.raises(ResourceNotFoundError) as exc:
        t.upsert_entity({"PartitionKey": "p", "RowKey": "r"})
    assert _status(exc) == (404, "TableNotFound")
    with pytest.raises(ResourceNotFoundError):
        t.get_entity("p", "r")
    with pytest.raises(ResourceNotFoundError):
        list(t.query_entities("PartitionKey eq 'p'"))
    with pytest.raises(TableTransactionError) as texc:
        t.submit_transaction([("create", {"PartitionKey": "p", "RowKey": "r"})])
    assert _status(texc) == (404, "TableNotFound")
    t.create_table()
    with pytest.raises(ResourceExistsError) as exc:
        t.create_table()
    assert _status(exc) == (409, "TableAlreadyExists")


def test_transaction_is_atomic_and_reports_status_and_index(backend: Backend) -> None:
    t = backend.table()
    first = t.create_entity({"PartitionKey": "p", "RowKey": "a", "v": 1})["etag"]
    t.update_entity({"PartitionKey": "p", "RowKey": "a", "v": 2})
    new_b = ("create", {"PartitionKey": "p", "RowKey": "b"})
    stale = {"etag": first, "match_condition": MatchConditions.IfNotModified}
    cases: list[tuple[list[Any], int, str]] = [
        ([new_b, ("create", {"PartitionKey": "p", "RowKey": "a"})], 409, "EntityAlreadyExists"),
        ([new_b, ("update", {"PartitionKey": "p", "RowKey": "a", "v": 3}, stale)], 412, "UpdateConditionNotSatisfied"),
        ([new_b, ("delete", {"PartitionKey": "p", "RowKey": "a"}, stale)], 412, "UpdateConditionNotSatisfied"),
        ([new_b, ("delete", {"PartitionKey": "p", "RowKey": "zz"})], 404, "ResourceNotFound"),
        ([new_b, ("update", {"PartitionKey": "p", "RowKey": "zz", "v": 1})], 404, "ResourceNotFound"),
        ([new_b, ("upsert", {"PartitionKey": "p", "RowKey": "b"})], 400, "InvalidDuplicateRow"),
    ]
    for ops, status, code in cases:
        with pytest.raises(TableTransactionError) as exc:
            t.submit_transaction(ops)
        assert _status(exc) == (status, code), ops
        assert exc.value.index == 1
        assert [(e["RowKey"], e["v"]) for e in t.list_entities()] == [("a", 2)], "a failed batch changed nothing"
    with pytest.raises(ValueError, match="Partition Keys"):
        t.submit_transaction([new_b, ("create", {"PartitionKey": "q", "RowKey": "b"})])
    # Azurite answers an empty batch with 500 (what the real service says is untested here).
    with pytest.raises(HttpResponseError) as hexc:
        t.submit_transaction([])
    assert hexc.value.status_code == 500

    result = t.submit_transaction(
        [
            new_b,
            ("upsert", {"PartitionKey": "p", "RowKey": "c", "z": 1}),
            ("update", {"PartitionKey": "p", "RowKey": "a", "y": 1}, {"mode": UpdateMode.REPLACE}),
        ]
    )
    assert [set(r) for r in result] == [{"etag"}] * 3
    by_row = {e["RowKey"]: e for e in t.list_entities()}
    assert dict(by_row["a"]) == {"PartitionKey": "p", "RowKey": "a", "y": 1}
    assert [by_row[k].metadata["etag"] for k in "bca"] == [r["etag"] for r in result]
    result = t.submit_transaction(
        [("delete", {"PartitionKey": "p", "RowKey": "b"}), ("upsert", {"PartitionKey": "p", "RowKey": "a", "q": 1})]
    )
    assert result[0] == {} and set(result[1]) == {"etag"}  # a delete returns no ETag
    assert sorted(e["RowKey"] for e in t.list_entities()) == ["a", "c"]


def test_values_read_back_with_the_sdk_types(backend: Backend) -> None:
    t = backend.table()
    when = datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)
    guid = uuid.uuid4()
    t.create_entity(
        {
            "PartitionKey": "p",
            "RowKey": "r",
            "s": "text",
            "empty": "",
            "i": 5,
            "neg": -3,
            "big": EntityProperty(2**40, EdmType.INT64),
            "f": 1.0,
            "f2": 2.5,
            "b": True,
            "d": when,
            "local": datetime(2026, 1, 2, 4, 4, 5, tzinfo=UTC).astimezone(),
            "raw": b"\x00\x01\xff",
            "g": guid,
            "none": None,
        }
    )
    e = t.get_entity("p", "r")
    assert set(e) == {
        "PartitionKey",
        "RowKey",
        "s",
        "empty",
        "i",
        "neg",
        "big",
        "f",
        "f2",
        "b",
        "d",
        "local",
        "raw",
        "g",
    }
    assert (type(e["s"]), type(e["i"]), type(e["f"]), type(e["b"]), type(e["raw"])) == (str, int, float, bool, bytes)
    assert (e["i"], e["neg"], e["f"], e["f2"], e["b"], e["raw"], e["g"], e["empty"]) == (
        5, -3, 1.0, 2.5, True, b"\x00\x01\xff", guid, "",
    )  # fmt: skip
    assert e["big"] == EntityProperty(2**40, EdmType.INT64)  # Int64 comes back wrapped
    assert type(e["d"]).__name__ == "TablesEntityDatetime" and isinstance(e["d"], datetime)
    assert e["d"] == when and e["d"].utcoffset() == timedelta(0)
    assert e["local"] == datetime(2026, 1, 2, 4, 4, 5, tzinfo=UTC) and e["local"].tzinfo == UTC
    with pytest.raises(TypeError, match="too large"):
        t.create_entity({"PartitionKey": "p", "RowKey": "x", "n": 2**33})  # plain ints are Int32


def test_select_returns_only_selected_existing_properties(backend: Backend) -> None:
    t = backend.table()
    etag = t.create_entity({"PartitionKey": "p", "RowKey": "r", "a": 1, "b": "x", "c": True})["etag"]
    e = t.get_entity("p", "r", select=["a", "c", "zz"])
    assert dict(e) == {"a": 1, "c": True}  # no keys unless selected; a missing property is left out
    assert e.metadata["etag"] == etag and e.metadata["timestamp"] is None
    assert dict(t.get_entity("p", "r", select="b")) == {"b": "x"}
    rows = list(t.query_entities("PartitionKey eq 'p'", select=["RowKey", "b"]))
    assert [dict(r) for r in rows] == [{"RowKey": "r", "b": "x"}]
    assert rows[0].metadata["etag"] == etag


@pytest.fixture
def filled(backend: Backend) -> Any:
    t = backend.table()
    base = datetime(2026, 1, 1, tzinfo=UTC)
    for i in range(7):
        t.upsert_entity(
            {
                "PartitionKey": "q",
                "RowKey": f"r{i}",
                "n": i,
                "s": "it's" if i == 3 else f"s{i}",
                "d": base + timedelta(hours=i),
                "b": i % 2 == 0,
                "f": i / 2,
            }
        )
    t.upsert_entity({"PartitionKey": "other", "RowKey": "r0", "n": 0})
    return t


FILTERS: list[tuple[str, dict[str, Any] | None, list[int]]] = [
    ("n ge 2 and n lt 5", None, [2, 3, 4]),
    ("(n eq 1 or n eq 5)", None, [1, 5]),
    ("not (n eq 1 or n eq 5)", None, [0, 2, 3, 4, 6]),
    ("n ne 3 and n ne 4", None, [0, 1, 2, 5, 6]),
    ("(n le 1 or n ge 5) and b eq true", None, [0, 6]),
    ("d lt @c", {"c": datetime(2026, 1, 1, 3, tzinfo=UTC)}, [0, 1, 2]),
    ("d ge @lo and d lt @hi", {"lo": datetime(2026, 1, 1, tzinfo=UTC), "hi": datetime(2026, 1, 1, 1, tzinfo=UTC)}, [0]),
    ("d eq @c", {"c": datetime(2026, 1, 1, 1, tzinfo=UTC)}, [1]),
    ("d lt datetime'2026-01-01T02:00:00Z'", None, [0, 1]),
    ("s eq @s", {"s": "it's"}, [3]),
    ("s eq 'it''s'", None, [3]),
    ("s gt 's4'", None, [5, 6]),  # ordinal string comparison
    ("b eq true", None, [0, 2, 4, 6]),
    ("b eq @b", {"b": False}, [1, 3, 5]),
    ("f gt 1.5", None, [4, 5, 6]),
    ("f gt @f", {"f": 1.5}, [4, 5, 6]),
    ("n gt 2.5", None, [3, 4, 5, 6]),  # Int32 against a double: numeric
    ("n eq @n", {"n": 3}, [3]),
    ("( n eq @a or n eq @b )", {"a": 1, "b": 2}, [1, 2]),
    ("RowKey ge @lo and RowKey lt @hi", {"lo": "r2", "hi": "r4"}, [2, 3]),
    ("missing eq 'x'", None, []),
    ("missing ne 'x'", None, []),  # a missing property never matches, not even `ne`
    ("not missing eq 'x'", None, [0, 1, 2, 3, 4, 5, 6]),  # ... but `not` just negates
    ("n eq '3'", None, []),  # type mismatch: no match
    ("N eq 3", None, []),  # property names are case-sensitive
    ("n eq 3 AND b eq false", None, [3]),  # Azurite takes operators in any case
    ("Timestamp ge datetime'2001-01-01T00:00:00Z' and n lt 2", None, [0, 1]),
]


@pytest.mark.parametrize(("query", "params", "expected"), FILTERS, ids=[f[0] for f in FILTERS])
def test_query_filters(filled: Any, query: str, params: dict[str, Any] | None, expected: list[int]) -> None:
    rows = filled.query_entities(f"PartitionKey eq 'q' and {query}", parameters=params)
    assert [e["n"] for e in rows] == expected


def test_query_quirks(filled: Any) -> None:
    # The SDK substitutes @params only between spaces: "(n eq @a)" looks up "a)".
    with pytest.raises(KeyError):
        list(filled.query_entities("PartitionKey eq 'q' and (n eq @a)", parameters={"a": 1}))
    # Azurite 3.35 answers 500 to an Int64 literal such as the SDK writes for ints over 32 bits.
    with pytest.raises(HttpResponseError) as exc:
        list(filled.query_entities("PartitionKey eq 'q' and n eq @n", parameters={"n": 2**40}))
    assert exc.value.status_code == 500
    assert [e["RowKey"] for e in filled.query_entities("PartitionKey eq 'other'")] == ["r0"]
    assert [(e["PartitionKey"], e["RowKey"]) for e in filled.query_entities("n eq 0")] == [("other", "r0"), ("q", "r0")]


def test_pagination_with_continuation_tokens(filled: Any) -> None:
    pages = filled.query_entities("PartitionKey eq 'q'", results_per_page=3, select=["RowKey"]).by_page()
    first = [e["RowKey"] for e in next(pages)]
    token = pages.continuation_token
    assert first == ["r0", "r1", "r2"]
    assert isinstance(token, dict) and set(token) == {"PartitionKey", "RowKey"}
    # Resume from the token in a new query, as the API's cursor does.
    resumed = filled.query_entities("PartitionKey eq 'q'", results_per_page=3, select=["RowKey"]).by_page(
        continuation_token=token
    )
    rest = []
    for page in resumed:
        rest.append([e["RowKey"] for e in page])
    assert rest == [["r3", "r4", "r5"], ["r6"]]
    assert resumed.continuation_token is None
    # A page that ends exactly at the last match carries no token (Azurite knows it is the end).
    exact = filled.query_entities("PartitionKey eq 'q'", results_per_page=7).by_page()
    assert [len(list(p)) for p in exact] == [7] and exact.continuation_token is None
    assert len(list(filled.query_entities("PartitionKey eq 'q'", results_per_page=2))) == 7
    # The token names the next *match*, and the last page has none even if non-matching rows follow.
    # (The real service may also hand out empty pages and trailing tokens: callers must not rely on this.)
    for query, per_page, expected in [
        ("n le 2", 3, [["r0", "r1", "r2"]]),
        ("n le 2", 2, [["r0", "r1"], ["r2"]]),
        ("n eq 1 or n eq 5", 1, [["r1"], ["r5"]]),
    ]:
        pager = filled.query_entities(f"PartitionKey eq 'q' and ({query})", results_per_page=per_page).by_page()
        assert [[e["RowKey"] for e in page] for page in pager] == expected
    listing = filled.list_entities(results_per_page=4).by_page()
    assert len(list(next(listing))) == 4 and set(listing.continuation_token) == {"PartitionKey", "RowKey"}


def test_a_filtered_query_resumes_from_a_token_naming_a_row_that_does_not_match(filled: Any) -> None:
    # What the fake's short pages (FakeStorage.rows_per_scan, the real service's scan budget) hand out: a token
    # naming the next row to look at, matching or not. Azurite resumes from such a token as the fake does.
    def b64(text: str) -> str:
        return base64.b64encode(text.encode()).decode()

    token = {"PartitionKey": b64("q"), "RowKey": b64("r2")}
    pager = filled.query_entities("PartitionKey eq 'q' and (n eq 1 or n eq 5)", results_per_page=5).by_page(
        continuation_token=token
    )
    assert [[e["RowKey"] for e in page] for page in pager] == [["r5"]] and pager.continuation_token is None


KEY_RANGES: list[tuple[str, list[str]]] = [
    # The fake looks only at the rows inside a filter's key range (shared.storage.fake._Range): the answers must
    # be Azurite's, whatever the bounds, their order, or an ``or`` that makes them no range at all.
    ("PartitionKey eq 'q' and RowKey gt 'r2' and RowKey le 'r4'", ["q/r3", "q/r4"]),
    ("RowKey lt 'r2' and PartitionKey eq 'q'", ["q/r0", "q/r1"]),
    ("PartitionKey eq 'q' and RowKey eq 'r5'", ["q/r5"]),
    ("PartitionKey eq 'q' and RowKey ge 'r5' and RowKey lt 'r3'", []),
    ("PartitionKey eq 'q' and RowKey ge 'r1' and RowKey ge 'r5'", ["q/r5", "q/r6"]),
    ("PartitionKey eq 'q' and RowKey lt 'r6' and RowKey lt 'r2'", ["q/r0", "q/r1"]),
    ("PartitionKey eq 'other' and RowKey lt '~'", ["other/r0"]),
    ("RowKey eq 'r0'", ["other/r0", "q/r0"]),  # no partition: every partition
    ("PartitionKey eq 'q' or PartitionKey eq 'other'", ["other/r0"] + [f"q/r{i}" for i in range(7)]),
    ("PartitionKey eq 'q' and (RowKey lt 'r1' or RowKey ge 'r6')", ["q/r0", "q/r6"]),
    ("PartitionKey eq 'q' and not RowKey lt 'r5'", ["q/r5", "q/r6"]),
    ("PartitionKey eq 'q' and RowKey ge 'r4' and n lt 6", ["q/r4", "q/r5"]),
]


@pytest.mark.parametrize(("query", "expected"), KEY_RANGES, ids=[k[0] for k in KEY_RANGES])
def test_key_range_queries(filled: Any, query: str, expected: list[str]) -> None:
    assert [f"{e['PartitionKey']}/{e['RowKey']}" for e in filled.query_entities(query)] == expected
    paged = filled.query_entities(query, results_per_page=1).by_page()
    # (an empty answer is one empty page, on both)
    assert [[f"{e['PartitionKey']}/{e['RowKey']}" for e in page] for page in paged] == ([[k] for k in expected] or [[]])


def test_a_key_range_query_resumes_from_a_token_before_its_range(filled: Any) -> None:
    token = {"PartitionKey": base64.b64encode(b"q").decode(), "RowKey": base64.b64encode(b"r0").decode()}
    pager = filled.query_entities("PartitionKey eq 'q' and RowKey ge 'r4'", results_per_page=5).by_page(
        continuation_token=token
    )
    assert [[e["RowKey"] for e in page] for page in pager] == [["r4", "r5", "r6"]]


def test_the_fake_counts_the_rows_a_query_looks_at_inside_its_key_range() -> None:
    # The service's cost, which Azurite does not show: a range query reads its range, a partition query the
    # partition, a query without PartitionKey eq (or with an or at the top) the table.
    storage = FakeStorage(FakeClock())
    t = storage.table("t")
    for pk in ("a", "b"):
        for i in range(5):
            t.create_entity({"PartitionKey": pk, "RowKey": f"r{i}", "n": i})
    for query, scanned in [
        ("PartitionKey eq 'b' and RowKey ge 'r1' and RowKey lt 'r3'", 2),
        ("PartitionKey eq 'b' and RowKey gt 'r1' and RowKey le 'r3'", 2),
        ("PartitionKey eq 'b' and RowKey eq 'r4'", 1),
        ("PartitionKey eq 'b' and n eq 1", 5),
        ("PartitionKey eq 'b' and (RowKey lt 'r1')", 5),  # in parentheses: not taken as a key bound
        ("n eq 1", 10),
        ("PartitionKey eq 'a' or PartitionKey eq 'b'", 10),
    ]:
        storage.reset_ops()
        list(t.query_entities(query))
        assert storage.rows_scanned == scanned, query
    storage.reset_ops()
    storage.rows_per_scan = 1  # the budget counts the same rows: one request per row of the range
    assert [e["RowKey"] for e in t.query_entities("PartitionKey eq 'a' and RowKey ge 'r3'")] == ["r3", "r4"]
    assert storage.ops()["table:query"] == 2 and storage.rows_scanned == 2


# --------------------------------------------------------------------------- queues


def test_queue_visibility_dequeue_count_and_stale_receipts(backend: Backend) -> None:
    q = backend.queue()
    sent = q.send_message("héllo")
    assert sent.content == "héllo" and sent.dequeue_count is None and sent.pop_receipt
    got = q.receive_message(visibility_timeout=1)
    # With TextBase64EncodePolicy and no decode policy, content is the base64 text (devhost decodes it).
    assert got.content == base64.b64encode("héllo".encode()).decode()
    assert got.id == sent.id and got.dequeue_count == 1
    assert got.next_visible_on > got.inserted_on - timedelta(seconds=1)
    assert q.receive_message() is None  # invisible until the timeout
    backend.wait(1.3)
    again = q.receive_message(visibility_timeout=30)
    assert again.id == got.id and again.dequeue_count == 2 and again.pop_receipt != got.pop_receipt
    with pytest.raises(HttpResponseError) as exc:
        q.delete_message(again.id, got.pop_receipt)
    assert _status(exc) == (400, "PopReceiptMismatch")
    q.delete_message(again.id, again.pop_receipt)
    with pytest.raises(ResourceNotFoundError) as nexc:
        q.delete_message(again)
    assert _status(nexc) == (404, "MessageNotFound")
    with pytest.raises(ValueError, match="pop_receipt"):
        q.delete_message(again.id)


def test_a_lapsed_receipt_still_deletes_until_someone_receives_again(backend: Backend) -> None:
    q = backend.queue()
    q.send_message("x")
    got = q.receive_message(visibility_timeout=1)
    backend.wait(1.3)
    q.delete_message(got)  # visible again, but nobody took it: the receipt is still the current one
    assert q.get_queue_properties().approximate_message_count == 0
    sent = q.send_message("y")
    q.delete_message(sent)  # the receipt from send works too


def test_update_message_rotates_the_pop_receipt(backend: Backend) -> None:
    q = backend.queue()
    q.send_message("x")
    got = q.receive_message(visibility_timeout=30)
    # By id, as devhost's renewer does: visibility only, content unchanged.
    updated = q.update_message(got.id, pop_receipt=got.pop_receipt, visibility_timeout=60)
    assert updated.pop_receipt != got.pop_receipt and updated.id == got.id
    for stale in (lambda: q.delete_message(got.id, got.pop_receipt), lambda: q.update_message(got.id, pop_receipt=got.pop_receipt, visibility_timeout=1)):  # fmt: skip
        with pytest.raises(HttpResponseError) as exc:
            stale()
        assert _status(exc) == (400, "PopReceiptMismatch")
    newer = q.update_message(got.id, pop_receipt=updated.pop_receipt, visibility_timeout=0, content="y")
    assert newer.content == "y"
    # update_message(visibility_timeout=0) makes it visible again at once; the dequeue count is unchanged by updates.
    back = q.receive_message(visibility_timeout=30)
    assert back.content == base64.b64encode(b"y").decode() and back.dequeue_count == 2
    # Passing the message object re-sends its (already encoded) content: it gets encoded twice.
    q.update_message(back, visibility_timeout=0)
    assert q.peek_messages()[0].content == base64.b64encode(back.content.encode()).decode()


def test_peek_count_and_batches(backend: Backend) -> None:
    q = backend.queue()
    for text in ("a", "b"):
        q.send_message(text)
    q.send_message("later", visibility_timeout=30)
    assert q.get_queue_properties().approximate_message_count == 3  # invisible messages count too
    peeked = q.peek_messages(max_messages=32)
    assert [base64.b64decode(m.content) for m in peeked] == [b"a", b"b"]
    assert all(m.pop_receipt is None and m.inserted_on.tzinfo is not None for m in peeked)
    assert q.peek_messages()[0].content == peeked[0].content  # one by default, oldest first
    q.receive_message(visibility_timeout=30)
    assert [base64.b64decode(m.content) for m in q.peek_messages(max_messages=5)] == [b"b"]
    assert q.get_queue_properties().approximate_message_count == 3
    with pytest.raises(ValueError):
        q.peek_messages(max_messages=33)
    with pytest.raises(HttpResponseError) as exc:
        q.receive_message(visibility_timeout=0)
    assert _status(exc) == (400, "OutOfRangeQueryParameterValue")
    with pytest.raises(HttpResponseError) as exc:
        list(q.receive_messages(messages_per_page=33))
    assert _status(exc) == (400, "OutOfRangeQueryParameterValue")
    with pytest.raises(HttpResponseError) as exc:
        q.send_message("x", visibility_timeout=10, time_to_live=5)
    assert _status(exc) == (400, "InvalidQueryParameterValue")
    q.clear_messages()
    assert q.get_queue_properties().approximate_message_count == 0
    for i in range(5):
        q.send_message(str(i))
    first = list(q.receive_messages(messages_per_page=2, max_messages=3, visibility_timeout=30))
    assert [base64.b64decode(m.content) for m in first] == [b"0", b"1", b"2"]
    assert len(list(q.receive_messages(messages_per_page=32, visibility_timeout=30))) == 2
    with pytest.raises(ResourceExistsError):
        q.create_queue()


def test_redelivered_message_queues_behind_newer_ones(backend: Backend) -> None:
    q = backend.queue()
    for text in ("A", "B", "C"):
        q.send_message(text)
    q.receive_message(visibility_timeout=1)
    backend.wait(1.3)
    order = [base64.b64decode(m.content) for m in q.receive_messages(messages_per_page=32, visibility_timeout=30)]
    assert order == [b"B", b"C", b"A"]  # ordered by when each became visible


def test_message_size_limit(backend: Backend) -> None:
    q = backend.queue()
    q.send_message("a" * 49152)  # 65,536 bytes once base64-encoded
    with pytest.raises(HttpResponseError) as exc:
        q.send_message("a" * 49153)
    assert _status(exc) == (413, "RequestBodyTooLarge")
    raw = backend.raw_queue(q.queue_name)
    raw.send_message("a" * 65536)
    with pytest.raises(HttpResponseError) as exc:
        raw.send_message("a" * 65537)
    assert exc.value.status_code == 413
    # Unencoded text arrives as it was sent.
    got = list(raw.receive_messages(messages_per_page=32, visibility_timeout=30))
    assert sorted(len(m.content) for m in got) == [65536, 65536]


# --------------------------------------------------------------------------- blobs


def test_blob_overwrite_404_prefix_listing_and_batch_delete(backend: Backend) -> None:
    c = backend.container()
    c.upload_blob("a/1", b"hello", content_settings=ContentSettings(content_type="text/plain"))
    with pytest.raises(ResourceExistsError) as exc:
        c.upload_blob("a/1", b"x")
    assert _status(exc) == (409, "BlobAlreadyExists")
    c.upload_blob("a/1", b"hello2", overwrite=True)
    c.upload_blob("a/2", "str data")
    c.upload_blob("b/1", b"")
    assert c.download_blob("a/1").readall() == b"hello2"
    assert c.download_blob("a/2").readall() == b"str data"
    with pytest.raises(ResourceNotFoundError) as exc:
        c.download_blob("nope")
    assert _status(exc) == (404, "BlobNotFound")
    assert [(b.name, b.size) for b in c.list_blobs(name_starts_with="a/")] == [("a/1", 6), ("a/2", 8)]
    assert [b.name for b in c.list_blobs()] == ["a/1", "a/2", "b/1"]
    assert [r.status_code for r in c.delete_blobs("a/1", "a/2")] == [202, 202]
    # A missing blob fails the batch call, but the others are deleted.
    with pytest.raises(PartialBatchErrorException) as pexc:
        c.delete_blobs("a/1", "b/1")
    assert pexc.value.status_code == 202
    assert list(c.list_blobs()) == []
    assert list(c.delete_blobs()) == []
    blob = c.get_blob_client("x")
    assert not blob.exists()
    blob.upload_blob(b"1")
    assert blob.exists() and blob.download_blob().readall() == b"1"
    blob.delete_blob()
    with pytest.raises(ResourceNotFoundError):
        blob.delete_blob()
    with pytest.raises(ResourceExistsError) as exc:
        c.create_container()
    assert _status(exc) == (409, "ContainerAlreadyExists")


def test_blob_leases_as_devhost_timers_use_them(backend: Backend) -> None:
    c = backend.container()
    blob = c.get_blob_client("locks/host/Timer.Listener")
    blob.upload_blob(b"", overwrite=False)
    mine, theirs = str(uuid.uuid4()), str(uuid.uuid4())
    lease = blob.acquire_lease(lease_duration=15, lease_id=mine)
    assert lease.id == mine
    with pytest.raises(ResourceExistsError) as exc:
        blob.acquire_lease(lease_duration=15, lease_id=theirs)
    assert _status(exc) == (409, "LeaseAlreadyPresent")
    assert blob.acquire_lease(lease_duration=15, lease_id=mine).id == mine  # same id: taken again
    with pytest.raises(ResourceExistsError):
        blob.upload_blob(b"", overwrite=False)  # exists: 409 before the lease is looked at
    with pytest.raises(HttpResponseError) as hexc:
        blob.upload_blob(b"x", overwrite=True)
    assert _status(hexc) == (412, "LeaseIdMissing")
    with pytest.raises(HttpResponseError) as hexc:
        blob.delete_blob()
    assert _status(hexc) == (412, "LeaseIdMissing")
    blob.upload_blob(b"x", overwrite=True, lease=lease)
    lease.renew()
    lease.release()
    with pytest.raises(ValueError):
        lease.renew()  # the released lease client has no id any more
    other = blob.acquire_lease(lease_duration=15, lease_id=theirs)
    with pytest.raises(ResourceExistsError) as exc:
        backend.lease(blob, mine).renew()
    assert _status(exc) == (409, "LeaseIdMismatchWithLeaseOperation")
    assert other.break_lease(lease_break_period=0) == 0
    with pytest.raises(ResourceExistsError) as exc:
        other.renew()
    assert _status(exc) == (409, "LeaseIsBrokenAndCannotBeRenewed")
    with pytest.raises(HttpResponseError) as hexc:
        blob.acquire_lease(lease_duration=5)
    assert _status(hexc) == (400, "InvalidHeaderValue")
    with pytest.raises(ResourceNotFoundError):
        c.get_blob_client("missing").acquire_lease(lease_duration=15)


def test_size_limits_of_entities(backend: Backend) -> None:
    t = backend.table()
    key = {"PartitionKey": "p", "RowKey": "r"}
    t.create_entity(key | {"s": "é" * 32768, "b": b"x" * 65536})  # 64 KiB as UTF-16, 64 KiB of binary
    for too_big in ({"s": "a" * 32769}, {"b": b"x" * 65537}):
        with pytest.raises(HttpResponseError) as exc:
            t.upsert_entity(key | too_big)
        assert _status(exc) == (400, "PropertyValueTooLarge")
    # Azurite limits the request's JSON to 1 MiB (the real service limits the entity's own size).
    with pytest.raises(HttpResponseError) as exc:
        t.upsert_entity(key | {f"s{i}": "a" * 30000 for i in range(36)})
    assert _status(exc) == (400, "EntityTooLarge")
    t.upsert_entity(key | {f"s{i}": "a" * 30000 for i in range(34)})
    with pytest.raises(TableTransactionError) as texc:
        t.submit_transaction([("upsert", key | {"s": "a" * 32769})])
    assert _status(texc) == (400, "PropertyValueTooLarge")


def test_operation_counts_match_the_meter(backend: Backend) -> None:
    """The fake counts the billable requests that shared metering counts on real clients."""
    t, q, c = backend.table(), backend.queue(), backend.container()
    backend.reset_ops()
    etag = t.create_entity({"PartitionKey": "p", "RowKey": "r", "v": 1})["etag"]
    t.update_entity(
        {"PartitionKey": "p", "RowKey": "r", "v": 2}, etag=etag, match_condition=MatchConditions.IfNotModified
    )
    with pytest.raises(ResourceModifiedError):
        t.update_entity({"PartitionKey": "p", "RowKey": "r"}, etag=etag, match_condition=MatchConditions.IfNotModified)
    with pytest.raises(ValueError):
        t.update_entity({"PartitionKey": "p", "RowKey": "r"}, etag=etag)  # refused client-side: no request
    t.update_entity({"PartitionKey": "p", "RowKey": "r", "v": 3}, mode=UpdateMode.REPLACE)
    t.upsert_entity({"PartitionKey": "p", "RowKey": "s"})
    t.get_entity("p", "r")
    t.submit_transaction([("upsert", {"PartitionKey": "p", "RowKey": f"x{i}"}) for i in range(5)])
    assert len(list(t.query_entities("PartitionKey eq 'p'", results_per_page=3))) == 7  # 3 pages
    t.delete_entity("p", "s")
    for text in ("a", "b"):
        q.send_message(text)
    got = list(q.receive_messages(messages_per_page=32, visibility_timeout=30))
    assert q.receive_message() is None
    q.peek_messages()
    renewed = q.update_message(got[0].id, pop_receipt=got[0].pop_receipt, visibility_timeout=30)
    q.delete_message(got[0].id, renewed.pop_receipt)
    q.get_queue_properties()
    c.upload_blob("a/1", b"1")
    c.upload_blob("a/2", b"2", overwrite=True)
    c.download_blob("a/1").readall()
    names = [b.name for b in c.list_blobs(name_starts_with="a/")]
    c.delete_blobs(*names)
    assert not c.get_blob_client("a/1").exists()
    assert backend.ops() == Counter(
        {
            "table:insert": 1,
            "table:merge": 3,
            "table:update": 1,
            "table:get": 1,
            "table:batch": 1,
            "table:query": 3,
            "table:delete": 1,
            "queue:send": 2,
            "queue:receive": 1,  # the page that got both messages
            "queue:receive-empty": 3,  # the page after it, the empty receive_message, the peek (all invisible)
            "queue:update": 1,
            "queue:delete": 1,
            "queue:get-metadata": 1,
            "blob:put": 2,
            "blob:get": 2,
            "blob:post": 1,
            "blob:head": 1,
        }
    )
