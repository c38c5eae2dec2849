"""``shared.storage.tables`` against the SDK's client on ``$batch`` answers Azurite never sends.

Azurite and Azure Storage write every multipart line ending as CRLF. Cosmos DB's Table API does not
reliably do so: the .NET Tables SDK parses ``$batch`` answers with ``expectBoundariesWithCRLF: false``
"to accommodate Cosmos response bodies which are inconsistent with CRLF and LF usage"
(Azure/azure-sdk-for-net#15366, after #14272). azure-core's ``email`` parser accepts LF-only line
endings. The hand-written splitter in ``shared.storage.tables`` once cut only at CRLF: it found no parts
and reported a failed transaction as a success (found in review; these tests failed then).

Each answer is canned (a requests adapter), so both clients parse the same bytes and no Azurite is needed.
"""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
import requests
from azure.core.credentials import AzureNamedKeyCredential
from azure.core.exceptions import HttpResponseError
from azure.core.pipeline.transport import RequestsTransport
from azure.data import tables as sdk
from azure.data.tables import TableTransactionError
from requests.adapters import BaseAdapter

from shared.storage import tables as ours

_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
_OPS = [("create", {"PartitionKey": "p", "RowKey": "a"}), ("create", {"PartitionKey": "p", "RowKey": "b"})]


class _Canned(BaseAdapter):
    def __init__(self, body: bytes) -> None:
        super().__init__()
        self.body = body

    def send(self, request: Any, **_: Any) -> requests.Response:
        answer = requests.Response()
        answer.status_code, answer.reason, answer.url, answer.request = 202, "Accepted", request.url, request
        answer.headers.update({"Content-Type": "multipart/mixed; boundary=batchresponse_1"})
        answer.raw = io.BytesIO(self.body)
        return answer

    def close(self) -> None:
        pass


def _client(cls: Any, body: bytes) -> Any:
    session = requests.Session()
    session.mount("http://", _Canned(body))
    return cls("http://127.0.0.1:10002/devstoreaccount1", "T",
               credential=AzureNamedKeyCredential("devstoreaccount1", _KEY),
               transport=RequestsTransport(session=session), retry_total=0)


def _outcome(cls: Any, body: bytes) -> tuple[Any, ...]:
    try:
        return ("ok", [dict(r) for r in _client(cls, body).submit_transaction(_OPS)])
    except TableTransactionError as err:
        return ("TableTransactionError", err.status_code, str(err.error_code), err.index)


def _answer(parts: list[str], nl: str) -> bytes:
    inner = "".join(f"--changesetresponse_1\r\n{p}" for p in parts) + "--changesetresponse_1--\r\n"
    body = ("--batchresponse_1\r\nContent-Type: multipart/mixed; boundary=changesetresponse_1\r\n\r\n"
            f"{inner}--batchresponse_1--\r\n")
    return body.replace("\r\n", nl).encode()


_CONFLICT = (
    "Content-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n"
    "HTTP/1.1 409 Conflict\r\nDataServiceVersion: 3.0;\r\n"
    "Content-Type: application/json;odata=minimalmetadata;streaming=true;charset=utf-8\r\n\r\n"
    + json.dumps({"odata.error": {"code": "EntityAlreadyExists", "message": {
        "lang": "en-US", "value": "1:The specified entity already exists.\nRequestId:r\nTime:t"}}})
    + "\r\n"
)


def _created(i: int) -> str:
    return ("Content-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n"
            "HTTP/1.1 204 No Content\r\nDataServiceVersion: 3.0;\r\n"
            f"ETag: W/\"datetime'2024-01-01T00%3A00%3A0{i}.0000000Z'\"\r\n\r\n")


def test_crlf_answers_are_read_alike() -> None:
    """The control: with CRLF line endings the two clients agree (what Azurite exercises)."""
    for body in (_answer([_CONFLICT], "\r\n"), _answer([_created(0), _created(1)], "\r\n")):
        assert _outcome(ours.TableClient, body) == _outcome(sdk.TableClient, body)


def test_a_failed_transaction_in_an_lf_only_answer_is_not_reported_as_a_success() -> None:
    body = _answer([_CONFLICT], "\n")
    assert _outcome(sdk.TableClient, body) == ("TableTransactionError", 409, "EntityAlreadyExists", 1)
    assert _outcome(ours.TableClient, body) == _outcome(sdk.TableClient, body)  # ours: ("ok", [])


def test_an_lf_only_answer_keeps_every_operations_etag() -> None:
    body = _answer([_created(0), _created(1)], "\n")
    assert len(_outcome(sdk.TableClient, body)[1]) == 2
    assert _outcome(ours.TableClient, body) == _outcome(sdk.TableClient, body)  # ours: ("ok", [])


def test_an_answer_that_does_not_answer_every_operation_is_never_a_success() -> None:
    """Two operations, one part (a truncated or unreadable answer): an error, not a list of one ETag."""
    body = _answer([_created(0)], "\r\n")
    with pytest.raises(HttpResponseError, match="1 parts for 2 operations"):
        _client(ours.TableClient, body).submit_transaction(_OPS)
    truncated = _answer([_created(0), _created(1)], "\r\n").split(b"--changesetresponse_1--")[0]
    with pytest.raises(HttpResponseError):
        _client(ours.TableClient, truncated).submit_transaction(_OPS)


def test_folded_and_upper_case_part_headers_are_read() -> None:
    plain = _answer([_created(0), _created(1)], "\r\n")
    variants = [
        plain.replace(b"Content-Type: application/http", b"Content-Type: Application/HTTP"),
        plain.replace(b"Content-Type: application/http\r\n", b"Content-Type:\r\n application/http\r\n"),
    ]
    for body in variants:
        assert _outcome(ours.TableClient, body) == _outcome(sdk.TableClient, plain), body[:200]
