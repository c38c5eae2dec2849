"""The SDK's table clients, with an entity-group transaction (``$batch``) that costs what a single write costs.

Why this exists: ``azure-data-tables`` builds and parses every ``$batch`` body with the stdlib ``email``
package (``email.policy.HTTP`` header objects, a ``ThreadPoolExecutor`` per batch for the parts' policies).
Measured on Azurite (``bench/platform.py --sections batch``): a 2-row batch cost 9–12 ms of client CPU
against 3–4 ms for a single insert (4–5 ms here), and every submission and every finished job writes one.
No maintained library encodes OData batches faster, so only the two ends are hand-written here:

* the sub-requests are still built by the SDK (``TableBatchOperations``: entity serialisation, keys,
  ``If-Match``), and the batch is still sent through the client's own pipeline (credential, retry,
  hooks, metering);
* the body is the same bytes the SDK writes, formatted directly; the answer's parts are cut at their
  boundaries and each is parsed by ``http.client``, exactly as azure-core parses them, into the same
  response type, so ``TableTransactionError`` (status, error code, index) is raised by the SDK's own
  decoder. An answer that does not answer every operation is an error, never a success.

``tests/unit/contract`` and ``tests/integration/contract`` run every transaction case on this client and on the SDK's, on Azurite
(``test_batch_client.py``), and both on answers Azurite never sends (``test_batch_answers.py``).
"""

from __future__ import annotations

import http.client
import itertools
import re
from collections.abc import Iterator, Mapping, Sequence
from email.utils import formatdate
from io import BytesIO
from typing import Any
from uuid import uuid4

from azure.core.exceptions import HttpResponseError
from azure.core.rest import HttpRequest, _http_response_impl
from azure.data import tables as _sdk
from azure.data.tables import RequestTooLargeError, TableTransactionError, _base_client, _error
from azure.data.tables._models import LocationMode

# The SDK's own part type, part reader and error decoder (untyped private helpers), so answers match its exactly.
_PartResponse: Any = _http_response_impl.RestHttpClientTransportResponse
_decode_error: Any = _error._decode_error
_validate_tablename_error: Any = _error._validate_tablename_error
_part_metadata: Any = _base_client.extract_batch_part_metadata
_TransportWrapper: Any = _base_client.TransportWrapper

_CRLF = b"\r\n"


class _Socket:
    """What ``http.client.HTTPResponse`` reads from: one part's bytes (azure-core does the same)."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def makefile(self, *_: Any) -> BytesIO:
        return BytesIO(self._data)


def _part_response(raw: bytes, request: HttpRequest) -> Any:
    parsed = http.client.HTTPResponse(_Socket(raw), method=request.method)  # type: ignore[arg-type]
    parsed.begin()
    return _PartResponse(request=request, internal_response=parsed)


def encode(requests: Sequence[HttpRequest], batch: str, changeset: str) -> bytes:
    """The ``$batch`` body: one changeset holding every sub-request, as ``application/http`` parts."""
    date = formatdate(usegmt=True)
    out = [f"--{batch}\r\nContent-Type: multipart/mixed; boundary={changeset}\r\n\r\n".encode()]
    for index, req in enumerate(requests):
        body = req.content
        data = b"" if body is None else body.encode() if isinstance(body, str) else bytes(body)
        head = [f"{req.method} {req.url} HTTP/1.1"]
        head += [f"{k}: {v}" for k, v in req.headers.items() if k.lower() not in ("content-length", "x-ms-date", "date")]
        if data or req.method in ("POST", "PUT", "PATCH", "MERGE"):
            head.append(f"Content-Length: {len(data)}")
        head += [f"x-ms-date: {date}", f"Date: {date}"]
        out.append(
            f"--{changeset}\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n"
            f"Content-ID: {index}\r\n\r\n".encode()
        )
        out.append("\r\n".join(head).encode() + _CRLF + _CRLF + data + _CRLF)
    out.append(f"--{changeset}--\r\n\r\n--{batch}--\r\n".encode())
    return b"".join(out)


def _boundary(content_type: str) -> str:
    for param in content_type.split(";")[1:]:
        key, _, value = param.strip().partition("=")
        if key.strip().lower() == "boundary":
            return value.strip().strip('"')
    raise ValueError(f"multipart answer without a boundary: {content_type!r}")


_HEAD_END = re.compile(rb"\r?\n\r?\n")
_FOLDED = re.compile(r"\r?\n[ \t]+")


def _delimiters(body: bytes, boundary: str) -> Iterator[tuple[int, int, bool]]:
    """(start, end, is the close delimiter) of each ``--boundary`` line; the line break before it is its own.

    Found with ``bytes.find`` rather than a compiled pattern: each boundary is new, so a pattern would be
    compiled per answer (what the ``email`` path paid).
    """
    token = b"--" + boundary.encode()
    i = body.find(token)
    while i != -1:
        after = i + len(token)
        close = body.startswith(b"--", after)
        eol = body.find(b"\n", after)
        eol = len(body) if eol == -1 else eol
        rest = body[after + 2 if close else after : eol]
        if (i == 0 or body[i - 1 : i] == b"\n") and not rest.strip(b" \t\r"):
            start = i if i == 0 else i - (2 if body[i - 2 : i] == b"\r\n" else 1)
            yield start, min(eol + 1, len(body)), close
        i = body.find(token, after)


def _split(body: bytes, boundary: str) -> list[tuple[dict[str, str], bytes]]:
    """The parts of one multipart body: (headers with lower-case names, payload).

    Delimiters are matched at line starts, and line endings may be CRLF or bare LF: Azure Storage and
    Azurite write CRLF, Cosmos DB's Table API is known to mix in LF (Azure/azure-sdk-for-net#14272), and
    azure-core's ``email`` parser accepts both. Folded header lines are unfolded, as ``email`` does.
    """
    marks = list(_delimiters(body, boundary))
    parts: list[tuple[dict[str, str], bytes]] = []
    for (_, end_of_mark, close), (next_start, _, _) in itertools.pairwise(marks):
        if close:
            break
        chunk = body[end_of_mark:next_start]
        if chunk.startswith((b"\r\n", b"\n")):  # a part without headers begins with its blank line
            head, payload = b"", chunk[2 if chunk.startswith(b"\r\n") else 1 :]
        else:
            end = _HEAD_END.search(chunk)
            head, payload = (chunk[: end.start()], chunk[end.end() :]) if end else (chunk, b"")
        headers: dict[str, str] = {}
        for line in _FOLDED.sub(" ", head.decode("latin-1")).splitlines():
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        parts.append((headers, payload))
    return parts


def decode(body: bytes, content_type: str, requests: Sequence[HttpRequest], parent: HttpRequest) -> list[Any]:
    """The answer's ``application/http`` parts, in order, as the SDK's part responses."""
    found: list[Any] = []
    for headers, payload in _split(body, _boundary(content_type)):
        kind = headers.get("content-type", "")
        media = kind.split(";")[0].strip().lower()
        if media == "multipart/mixed":
            found += decode(payload, kind, requests[len(found) :], parent)
        elif media == "application/http":
            # Like the SDK: a part with no request of its own (an error about the whole batch) gets the batch's.
            request = requests[len(found)] if len(found) < len(requests) else parent
            found.append(_part_response(payload, request))
        else:
            raise ValueError(f"unexpected part in a batch answer: {kind!r}")
    return found


def _too_large(response: Any) -> Exception:
    error: Exception = _decode_error(
        response, error_message="The transaction request was too large", error_type=RequestTooLargeError
    )
    return error


class TableClient(_sdk.TableClient):
    """``azure.data.tables.TableClient`` with the cheaper ``$batch`` (see the module docstring)."""

    def _batch_send(self, table_name: str, *reqs: HttpRequest, **kwargs: Any) -> list[Mapping[str, Any]]:
        # Mirrors azure-data-tables 12.7 ``TablesBaseClient._batch_send``: same headers, same status handling.
        batch, changeset = f"batch_{uuid4()}", f"changeset_{uuid4()}"
        request = HttpRequest(
            method="POST",
            url=f"{self.scheme}://{self._primary_hostname}/$batch",
            headers={
                "x-ms-version": self.api_version,
                "DataServiceVersion": "3.0",
                "MaxDataServiceVersion": "3.0;NetFx",
                "Content-Type": f"multipart/mixed; boundary={batch}",
                "Accept": "application/json",
            },
            content=encode(reqs, batch, changeset),
        )
        response = self._client.send_request(request, stream=True, **kwargs)
        if response.status_code == 413:
            raise _too_large(response)
        if response.status_code != 202:
            decoded = _decode_error(response)
            _validate_tablename_error(decoded, table_name)
            raise decoded
        parts = decode(response.read(), response.headers.get("Content-Type", ""), reqs, request)
        error_parts = [p for p in parts if not 200 <= p.status_code < 300]
        if not error_parts and len(parts) != len(reqs):
            # A success answers every operation. Anything else is an answer we could not read: never a success.
            raise HttpResponseError(
                message=f"$batch answer with {len(parts)} parts for {len(reqs)} operations", response=response
            )
        if error_parts:
            if error_parts[0].status_code == 413:
                raise _too_large(response)
            decoded = _decode_error(response=error_parts[0], error_type=TableTransactionError)
            _validate_tablename_error(decoded, table_name)
            raise decoded
        return [_part_metadata(p) for p in parts]


class TableServiceClient(_sdk.TableServiceClient):
    """``azure.data.tables.TableServiceClient`` whose table clients are :class:`TableClient`."""

    def get_table_client(self, table_name: str, **kwargs: Any) -> TableClient:
        # Mirrors the SDK's ``get_table_client``: the table client shares this client's transport and policies.
        from azure.core.pipeline import Pipeline

        pipeline: Pipeline[Any, Any] = Pipeline(
            transport=_TransportWrapper(self._client._client._pipeline._transport),
            policies=self._policies,
        )
        return TableClient(
            self.url,
            table_name=table_name,
            credential=self.credential,
            api_version=self.api_version,
            pipeline=pipeline,
            location_mode=getattr(self, "_location_mode", LocationMode.PRIMARY),
            _hosts=self._hosts,
            **kwargs,
        )
