"""``shared.storage.tables`` (the cheaper ``$batch``) answers exactly like the SDK's own client, on Azurite.

The contract suite runs on production's client; here its table cases run on the SDK's client as well, the two
clients' request bodies are compared byte for byte, and the answers of every transaction outcome are compared
field by field.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from azure.core import MatchConditions
from azure.core.exceptions import HttpResponseError
from azure.core.pipeline.policies import SansIOHTTPPolicy
from azure.data import tables as sdk
from azure.data.tables import TableTransactionError, UpdateMode

from shared.storage import tables as ours
from tests.unit.contract import test_storage_contract as contract

_TABLE_CASES: list[Callable[[contract.Backend], None]] = [
    contract.test_missing_table_is_404,
    contract.test_transaction_is_atomic_and_reports_status_and_index,
    contract.test_values_read_back_with_the_sdk_types,
    contract.test_size_limits_of_entities,
    contract.test_operation_counts_match_the_meter,
]


@pytest.mark.parametrize("case", _TABLE_CASES, ids=lambda c: c.__name__)
def test_the_contract_holds_for_the_sdks_own_client_too(azurite: str, case: Callable[[contract.Backend], None]) -> None:
    case(contract._azurite_backend(azurite, sdk.TableServiceClient))


class _Capture(SansIOHTTPPolicy):  # type: ignore[type-arg]
    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    def on_request(self, request: Any) -> None:
        if request.http_request.url.endswith("$batch"):
            body = request.http_request.body
            self.bodies.append(body if isinstance(body, bytes) else body.encode())


def _normalise(body: bytes) -> list[bytes]:
    """A body without what differs by design: boundaries, dates, the two tables' ETags; lines sorted per part."""
    text = re.sub(rb"(batch|changeset)_[0-9a-f-]{36}", rb"\1_B", body)
    text = re.sub(rb"(x-ms-date|Date): [^\r]*", rb"\1: D", text)
    text = re.sub(rb"If-Match: [^\r]*", rb"If-Match: E", text)  # each table's entity has its own ETag
    return [b"\r\n".join(sorted(part.split(b"\r\n"))) for part in text.split(b"--changeset_B")]


def _pair(conn: str) -> tuple[Any, Any, _Capture, _Capture]:
    name = "b" + uuid.uuid4().hex[:12]
    caps = (_Capture(), _Capture())
    # (A service client's per-call policies do not reach the table clients it makes, so these are made directly.)
    mine = ours.TableClient.from_connection_string(conn, name, per_call_policies=[caps[0]])
    theirs = sdk.TableClient.from_connection_string(conn, name + "s", per_call_policies=[caps[1]])
    mine.create_table()
    theirs.create_table()
    return mine, theirs, caps[0], caps[1]


def _outcome(table: Any, ops: list[Any]) -> tuple[Any, ...]:
    try:
        result = table.submit_transaction(ops)
    except TableTransactionError as err:
        return ("TableTransactionError", type(err).__name__, err.status_code, str(err.error_code), err.index,
                err.message.split("\n")[0])
    except HttpResponseError as err:
        return ("HttpResponseError", type(err).__name__, err.status_code, str(err.error_code))
    except Exception as err:  # Azurite's answer to 101 operations is malformed: both clients fail to parse it alike
        return ("other", type(err).__name__)
    return ("ok", [sorted(r) for r in result])


def test_the_body_is_the_sdks_byte_for_byte_and_every_outcome_is_answered_alike(azurite: str) -> None:
    mine, theirs, cap_mine, cap_theirs = _pair(azurite)
    etags = {}
    for t in (mine, theirs):
        etags[t.table_name] = t.create_entity({"PartitionKey": "p", "RowKey": "a", "v": 1})["etag"]
    stale = 'W/"datetime\'2020-01-01T00%3A00%3A00.0000000Z\'"'
    scenarios: list[Callable[[str], list[Any]]] = [
        lambda e: [("create", {"PartitionKey": "p", "RowKey": "b", "s": "é ✓", "n": 7, "f": 1.5, "yes": True,
                               "bin": b"\x00\xff", "big": sdk.EntityProperty(2**40, sdk.EdmType.INT64)}),
                   ("update", {"PartitionKey": "p", "RowKey": "a", "v": 2},
                    {"etag": e, "match_condition": MatchConditions.IfNotModified})],
        lambda e: [("upsert", {"PartitionKey": "p", "RowKey": "c"}),
                   ("update", {"PartitionKey": "p", "RowKey": "a", "v": 3},
                    {"etag": stale, "match_condition": MatchConditions.IfNotModified})],
        lambda e: [("create", {"PartitionKey": "p", "RowKey": "d"}), ("create", {"PartitionKey": "p", "RowKey": "b"})],
        lambda e: [("delete", {"PartitionKey": "p", "RowKey": "zz"})],
        lambda e: [("update", {"PartitionKey": "p", "RowKey": "b", "w": 1}, {"mode": UpdateMode.REPLACE}),
                   ("upsert", {"PartitionKey": "p", "RowKey": "e", "x": "y"}, {"mode": UpdateMode.REPLACE}),
                   ("delete", {"PartitionKey": "p", "RowKey": "a"})],
        lambda e: [("upsert", {"PartitionKey": "p", "RowKey": "f", "s": "a" * 32769})],
        lambda e: [("create", {"PartitionKey": "p", "RowKey": f"m{i}"}) for i in range(101)],
    ]
    for i, ops_for in enumerate(scenarios):
        answers = [_outcome(t, ops_for(etags[t.table_name])) for t in (mine, theirs)]
        assert answers[0] == answers[1], (i, answers)
    assert [sorted(dict(e).items()) for e in mine.list_entities()] == [
        sorted(dict(e).items()) for e in theirs.list_entities()
    ]
    assert len(cap_mine.bodies) == len(cap_theirs.bodies) == len(scenarios)
    for a, b in zip(cap_mine.bodies, cap_theirs.bodies, strict=True):
        assert _normalise(a.replace(mine.table_name.encode(), b"T")) == _normalise(b.replace(theirs.table_name.encode(), b"T"))

