"""In-memory fakes of the Table, Queue and Blob SDK clients: the fast test tier.

Each fake answers the way azure-data-tables 12.7 / azure-storage-queue 12.18 /
azure-storage-blob 12.31 answer against Azurite 3.35 (tests/unit/contract and its Azurite twin prove it
on both backends): the same exception classes, status codes and error codes,
the same value types read back, ETags that change on every write, queue
visibility, dequeue counts and pop receipts. Time comes from a :class:`FakeClock`
shared by all three, so a visibility timeout or lease expiry can be crossed
with ``clock.advance(...)`` instead of sleeping. One lock serialises every
operation: a call is atomic, as a single request to Storage is.

Entities go through the SDK's own (private) serializer and deserializer, so a
type the SDK rejects on the wire (an int >= 2**31 without Int64) is rejected
here too, and reads return the SDK's TableEntity / TablesEntityDatetime /
EntityProperty. Build everything from one bundle::

    storage = FakeStorage()                      # real time; FakeStorage(FakeClock(start)) freezes it
    table = storage.table("jobs")                # created on first use, like connections.get_table_client
    queue = storage.queue("jobs")                # base64 text, like connections.get_queue_client
    blobs = storage.container("results")
    storage.ops()                                # Counter of "table:merge", "queue:receive", ...
"""

from __future__ import annotations

import base64
import binascii
import json
import operator
import re
import secrets
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar, cast
from urllib.parse import quote

from azure.core import MatchConditions
from azure.core.exceptions import HttpResponseError, ResourceExistsError, ResourceModifiedError, ResourceNotFoundError
from azure.core.paging import ItemPaged
from azure.data.tables import EntityProperty, TableEntity, TableErrorCode, TableTransactionError, UpdateMode
from azure.data.tables import _deserialize as _tdeser
from azure.data.tables import _serialize as _tser
from azure.storage.blob import BlobProperties, ContentSettings, PartialBatchErrorException
from azure.storage.queue import QueueMessage, QueueProperties, TextBase64EncodePolicy

from shared.config.constants import TABLE_BATCH_MAX_BYTES
from shared.observability.metering import TransactionMeter

_E = TypeVar("_E", bound=HttpResponseError)
_C = TypeVar("_C")

# The SDK's private helpers are untyped; typed views of them.
_to_wire = cast(Callable[[Mapping[str, Any]], dict[str, Any]], _tser._add_entity_properties)
_from_wire = cast(Callable[[dict[str, Any]], TableEntity], _tdeser._convert_to_entity)
_match = cast(Callable[[str | None, MatchConditions], MatchConditions], _tser._get_match_condition)
_substitute = cast(Callable[[dict[str, Any] | None, str], str], _tser._parameter_filter_substitution)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MAX_QUEUE_TEXT = 65536  # bytes of (encoded) message text; Azurite measures ASCII exactly so
_MAX_TTL = timedelta(days=7)
_PAGE = 1000  # the Table service's page size when results_per_page is not given


def _error(cls: type[_E], status: int, code: str | None, message: str | None = None) -> _E:
    """An SDK exception as the SDK raises it, without an HTTP response behind it."""
    message = message or str(code)
    err = cls(message=f"{message}\nErrorCode:{code}" if code else message)
    err.status_code, err.reason = status, message
    if code is not None:
        err.error_code = code  # type: ignore[attr-defined]  # set dynamically by the SDKs as well
    return err


def _nf(code: str = TableErrorCode.RESOURCE_NOT_FOUND) -> ResourceNotFoundError:
    return _error(ResourceNotFoundError, 404, code)


def _bad(status: int, code: str, message: str | None = None) -> HttpResponseError:
    return _error(HttpResponseError, status, code, message)


class FakeClock:
    """Real UTC time plus an offset; ``FakeClock(start)`` stands still until advanced."""

    def __init__(self, start: datetime | None = None) -> None:
        self._start, self._offset, self._lock = start, timedelta(), threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return (self._start if self._start is not None else datetime.now(UTC)) + self._offset

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._offset += timedelta(seconds=seconds)


# --------------------------------------------------------------------------- tables


@dataclass
class _Row:
    wire: dict[str, Any]  # the JSON properties the SDK would have sent (with @odata.type annotations)
    ticks: int  # Timestamp in 100 ns units since the epoch: Storage's precision, and the ETag


def _ts_text(ticks: int) -> str:
    secs, frac = divmod(ticks, 10_000_000)
    return (_EPOCH + timedelta(seconds=secs)).strftime("%Y-%m-%dT%H:%M:%S") + f".{frac:07d}Z"


def _etag(ticks: int) -> str:
    return "W/\"datetime'" + quote(_ts_text(ticks)) + "'\""


def _selected(select: str | list[str] | None) -> list[str] | None:
    return None if not select else [n.strip() for n in (select.split(",") if isinstance(select, str) else select)]


def _entity(row: _Row, select: list[str] | None) -> TableEntity:
    wire = dict(row.wire)
    if select is not None:
        # Azurite returns only selected properties that exist, and no Timestamp unless selected.
        wire = {k: v for k, v in wire.items() if k.split("@", 1)[0] in select}
    if select is None or "Timestamp" in select:
        wire["Timestamp"] = _ts_text(row.ticks)
    wire["odata.etag"] = _etag(row.ticks)
    return _from_wire(wire)


def _values(row: _Row) -> dict[str, Any]:
    """Typed property values for filters (Int64 unwrapped; Timestamp included)."""
    e = _entity(row, None)
    out = {k: (v.value if isinstance(v, EntityProperty) else v) for k, v in e.items()}
    out["Timestamp"] = e.metadata["timestamp"]
    return out


#: One operation's multipart headers in a $batch body, about.
_BATCH_PART_BYTES = 400


def _sized(wire: dict[str, Any]) -> dict[str, Any]:
    """Azurite's limits: 64 KiB per string (as UTF-16) or binary value, 1 MiB of request JSON
    (the real service counts the entity's own size instead of the JSON)."""
    for name, value in wire.items():
        kind = wire.get(name + "@odata.type")
        if isinstance(value, str) and kind in (None, "Edm.String", "Edm.Binary"):
            size = len(base64.b64decode(value)) if kind == "Edm.Binary" else len(value.encode("utf-16-le"))
            if size > 65536:
                raise _bad(400, TableErrorCode.PROPERTY_VALUE_TOO_LARGE, f"{name} is too large.")
    if len(json.dumps(wire)) > 1024 * 1024:
        raise _bad(400, TableErrorCode.ENTITY_TOO_LARGE)
    return wire


def _key(entity: Mapping[str, Any]) -> tuple[str, str]:
    try:
        return str(entity["PartitionKey"]), str(entity["RowKey"])
    except KeyError as err:
        raise ValueError(f"{err.args[0]} must be present in an entity") from None


def _etag_for(entity: Any, etag: str | None, condition: MatchConditions | None) -> str | None:
    """The ETag to require, or None for unconditional; the SDK's own argument checks (ValueError)."""
    if condition and not etag and isinstance(entity, TableEntity):
        etag = entity.metadata.get("etag")
    return etag if _match(etag, condition or MatchConditions.Unconditionally) == MatchConditions.IfNotModified else None


def _stale(cls: type[_E]) -> _E:
    return _error(cls, 412, TableErrorCode.UPDATE_CONDITION_NOT_SATISFIED)


_TOKEN = re.compile(
    r"\s*(?:(?P<typed>(?:datetime|guid|X|binary)'[^']*')|(?P<str>'(?:[^']|'')*')"
    r"|(?P<num>-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?[LDdM]?)|(?P<paren>[()])|(?P<word>[A-Za-z_][A-Za-z0-9_]*))",
    re.IGNORECASE,
)
_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge,
}  # fmt: skip
_Pred = Callable[[Mapping[str, Any]], bool]
_MISSING = object()


def _literal(kind: str, text: str) -> Any:
    if kind == "str":
        return text[1:-1].replace("''", "'")
    if kind == "num":
        if text[-1] in "Ll":
            # Azurite 3.35 answers 500 to an Int64 literal (the SDK writes ints over 32 bits as 123L);
            # the real service accepts it.
            raise _bad(500, "InternalError", "Azurite rejects Int64 literals")
        return float(text.rstrip("DdMm")) if any(c in text for c in ".eEDdMm") else int(text)
    prefix, _, quoted = text.partition("'")
    body, prefix = quoted[:-1], prefix.lower()
    if prefix == "datetime":
        value = datetime.fromisoformat(body.replace("Z", "+00:00"))
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if prefix == "guid":
        return uuid.UUID(body)
    return binascii.unhexlify(body) if prefix == "x" else base64.b64decode(body)


def _same_kind(a: Any, b: Any) -> bool:
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in (a, b)):
        return True
    return any(isinstance(a, t) and isinstance(b, t) for t in (bool, str, datetime, bytes, uuid.UUID))


class _Filter:
    """Recursive descent over or / and / not / ( ) / comparisons; compiles to a predicate."""

    def __init__(self, text: str) -> None:
        self.tokens: list[tuple[str, str]] = []
        pos = 0
        while text[pos:].strip():
            m = _TOKEN.match(text, pos)
            if m is None or m.end() == pos:
                raise _bad(400, "InvalidInput", f"cannot parse the filter at {text[pos : pos + 20]!r}")
            kind = cast(str, m.lastgroup)
            self.tokens.append((kind, cast(str, m.group(kind))))
            pos = m.end()
        self.i = 0
        self.pred = self._or()
        if self.i != len(self.tokens):
            raise _bad(400, "InvalidInput", f"unexpected {self.tokens[self.i][1]!r} in the filter")
        self.range = _Range.of(self.tokens)

    def _peek(self) -> tuple[str, str]:
        if self.i >= len(self.tokens):
            raise _bad(400, "InvalidInput", "the filter ends too early")
        kind, text = self.tokens[self.i]
        return kind, text.lower() if kind == "word" else text

    def _at(self, word: str) -> bool:
        if self.i < len(self.tokens) and self._peek() in (("word", word), ("paren", word)):
            self.i += 1
            return True
        return False

    def _or(self) -> _Pred:
        parts = [self._and()]
        while self._at("or"):
            parts.append(self._and())
        return parts[0] if len(parts) == 1 else (lambda e: any(p(e) for p in parts))

    def _and(self) -> _Pred:
        parts = [self._not()]
        while self._at("and"):
            parts.append(self._not())
        return parts[0] if len(parts) == 1 else (lambda e: all(p(e) for p in parts))

    def _not(self) -> _Pred:
        if self._at("not"):
            inner = self._not()
            # Plain negation: Azurite matches `not missing eq 'x'` for every row lacking `missing`.
            return lambda e: not inner(e)
        if self._at("("):
            inner = self._or()
            if not self._at(")"):
                raise _bad(400, "InvalidInput", "missing ) in the filter")
            return inner
        left = self._operand()
        op = _OPS.get(self._peek()[1])
        if op is None:
            raise _bad(400, "InvalidInput", "expected a comparison operator in the filter")
        self.i += 1
        right = self._operand()

        def compare(e: Mapping[str, Any]) -> bool:
            a, b = left(e), right(e)
            # A missing property or a type mismatch never matches (not even `ne`).
            return a is not _MISSING and b is not _MISSING and _same_kind(a, b) and bool(op(a, b))

        return compare

    def _operand(self) -> Callable[[Mapping[str, Any]], Any]:
        kind, text = self._peek()
        self.i += 1
        if kind == "word" and text in ("true", "false"):
            return lambda e: text == "true"
        if kind == "word":
            name = self.tokens[self.i - 1][1]
            return lambda e: e.get(name, _MISSING)  # property names are case-sensitive
        if kind == "paren":
            raise _bad(400, "InvalidInput", f"unexpected {text!r} in the filter")
        value = _literal(kind, text)
        return lambda e: value


@dataclass
class _Range:
    """The rows a query makes the service look at: the key bounds of its filter's top-level ``and``.

    ``PartitionKey eq`` is a partition scan, with ``RowKey`` comparisons beside it a range inside it (a point query
    with ``RowKey eq``); anything else (no ``PartitionKey eq``, an ``or`` or ``not`` at the top) scans the table
    from its start. Each row inside the range is looked at, whether it matches the rest of the filter or not:
    that is what the real service counts against its 1,000 rows per request (``FakeStorage.rows_per_scan``) and
    what ``FakeStorage.rows_scanned`` counts. Bounds in parentheses or on other properties are not key bounds.
    """

    pk: str | None = None
    lo: str = ""
    lo_open: bool = False
    hi: str | None = None
    hi_closed: bool = False

    @classmethod
    def of(cls, tokens: list[tuple[str, str]]) -> _Range:
        depth, terms = 0, list[tuple[str, str, str]]()
        for i, (kind, text) in enumerate(tokens):
            if kind == "paren":
                depth += 1 if text == "(" else -1
            elif depth == 0 and kind == "word" and text.lower() in ("or", "not"):
                return cls()
            elif depth == 0 and kind == "word" and text in ("PartitionKey", "RowKey") and i + 2 < len(tokens) \
                    and tokens[i + 1][0] == "word" and tokens[i + 2][0] == "str":
                terms.append((text, tokens[i + 1][1].lower(), _literal("str", tokens[i + 2][1])))
        pks = {value for name, op, value in terms if name == "PartitionKey" and op == "eq"}
        if len(pks) != 1:
            return cls()
        r = cls(pk=pks.pop())
        for name, op, value in terms:
            if name != "RowKey":
                continue
            if op in ("ge", "gt", "eq") and (value > r.lo or (value == r.lo and op == "gt")):
                r.lo, r.lo_open = value, op == "gt"
            if op in ("lt", "le", "eq") and (r.hi is None or value < r.hi or (value == r.hi and op == "lt")):
                r.hi, r.hi_closed = value, op != "lt"
        return r

    def start(self) -> tuple[str, str]:
        return ("", "") if self.pk is None else (self.pk, self.lo)

    def before(self, key: tuple[str, str]) -> bool:
        return self.pk is not None and self.lo_open and key == (self.pk, self.lo)

    def past(self, key: tuple[str, str]) -> bool:
        if self.pk is None:
            return False
        if key[0] != self.pk or self.hi is None:
            return key[0] > self.pk
        return key[1] > self.hi or (key[1] == self.hi and not self.hi_closed)


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _token_start(token: dict[str, str]) -> tuple[str, str]:
    """Where a continuation token resumes. Either key may be missing (the service can send a NextPartitionKey
    alone); a value the service never issued is its 400 ``InvalidInput``, as for a malformed continuation."""
    try:
        pk, rk = token.get("PartitionKey"), token.get("RowKey")
        return (base64.b64decode(pk, validate=True).decode() if pk else "",
                base64.b64decode(rk, validate=True).decode() if rk else "")
    except (ValueError, TypeError, AttributeError):
        raise _bad(400, "InvalidInput", "One of the request inputs is not valid.") from None


class _Client:
    """What every fake client shares: its account, and the meter its requests are also counted on.

    A client built with a ``meter`` counts each of its requests on it, keyed as ``TransactionMeter.hook`` keys a
    real client's responses, besides the account's own count (:meth:`FakeStorage.ops`): so a platform on the
    fake counts its own requests on its meter, as the Azure clients' response hook counts a host's.
    """

    _s: FakeStorage
    _m: TransactionMeter | None = None

    def _call(self, op: str | None = None) -> AbstractContextManager[None]:
        return self._s.call(op, self._m)

    def _count(self, op: str) -> None:
        self._s.count(op, self._m)


class FakeTableClient(_Client):
    """The subset of ``azure.data.tables.TableClient`` the platform uses."""

    def __init__(self, storage: FakeStorage, table_name: str, meter: TransactionMeter | None = None) -> None:
        self._s, self.table_name, self.url, self._m = storage, table_name, f"fake://table/{table_name}", meter

    def _rows(self) -> dict[tuple[str, str], _Row]:
        rows = self._s._tables.get(self.table_name)
        if rows is None:
            raise _nf(TableErrorCode.TABLE_NOT_FOUND)
        return rows

    def _meta(self, ticks: int) -> dict[str, Any]:
        return {"date": _sec(self._s.clock.now()), "etag": _etag(ticks), "version": "2025-11-05"}

    def create_table(self) -> None:
        with self._call("table:insert"):
            if self.table_name in self._s._tables:
                raise _error(ResourceExistsError, 409, TableErrorCode.TABLE_ALREADY_EXISTS)
            self._s._tables[self.table_name] = {}

    def delete_table(self) -> None:
        with self._call("table:delete"):
            self._s._tables.pop(self.table_name, None)  # the SDK swallows 404

    def create_entity(self, entity: Mapping[str, Any], *, response_preference: str | None = None) -> dict[str, Any]:
        # ``response_preference`` only decides whether the service echoes the entity; the SDK's answer is the
        # metadata (with the ETag) either way, which is all this returns.
        wire = _to_wire(entity)  # client-side: a TypeError comes before any request
        with self._call("table:insert"):
            rows, key = self._rows(), _key(entity)
            if key in rows:
                # map_error's exception: no error_code attribute at all; check the status code.
                err = ResourceExistsError(message="The specified entity already exists.")
                err.status_code, err.reason = 409, "Conflict"
                raise err
            rows[key] = _Row(_sized(wire), self._s._tick())
            return self._meta(rows[key].ticks)

    def get_entity(self, partition_key: str, row_key: str, *, select: str | list[str] | None = None) -> TableEntity:
        with self._call("table:get"):
            row = self._rows().get((partition_key, row_key))
            if row is None:
                raise _nf()
            return _entity(row, _selected(select))

    def update_entity(
        self,
        entity: Mapping[str, Any],
        mode: UpdateMode | str = UpdateMode.MERGE,
        *,
        etag: str | None = None,
        match_condition: MatchConditions | None = None,
    ) -> dict[str, Any]:
        etag, wire = _etag_for(entity, etag, match_condition), _to_wire(entity)
        with self._call("table:merge" if mode == UpdateMode.MERGE else "table:update"):
            return self._meta(self._write(self._rows(), entity, wire, mode, etag, must_exist=True))

    def upsert_entity(self, entity: Mapping[str, Any], mode: UpdateMode | str = UpdateMode.MERGE) -> dict[str, Any]:
        wire = _to_wire(entity)
        with self._call("table:merge" if mode == UpdateMode.MERGE else "table:update"):
            return self._meta(self._write(self._rows(), entity, wire, mode, None, must_exist=False))

    def delete_entity(self, *args: Any, **kwargs: Any) -> None:
        """``delete_entity(pk, rk, etag=, match_condition=)`` or ``delete_entity(entity)``; 404 is swallowed as the SDK does."""
        entity = kwargs.pop("entity", None) or (args[0] if args and isinstance(args[0], Mapping) else None)
        if entity is not None:
            key = _key(entity)
        else:
            key = (kwargs.pop("partition_key", None) or args[0], kwargs.pop("row_key", None) or args[1])
        etag = _etag_for(entity, kwargs.get("etag"), kwargs.get("match_condition"))
        with self._call("table:delete"):
            rows = self._rows()
            row = rows.get(key)
            if row is not None and etag is not None and etag != _etag(row.ticks):
                raise _stale(ResourceModifiedError)
            rows.pop(key, None)

    def _write(
        self, rows: dict[tuple[str, str], _Row], entity: Mapping[str, Any], wire: dict[str, Any],
        mode: UpdateMode | str, etag: str | None, *, must_exist: bool,
    ) -> int:  # fmt: skip
        if mode not in (UpdateMode.MERGE, UpdateMode.REPLACE):
            raise ValueError(f"Mode type '{mode}' is not supported.")
        key = _key(entity)
        row = rows.get(key)
        if row is None and must_exist:
            raise _nf()
        if row is not None and etag is not None and etag != _etag(row.ticks):
            raise _stale(ResourceModifiedError)
        wire = _sized(wire)
        if row is not None and mode == UpdateMode.MERGE:
            merged = dict(row.wire)
            for name in wire:
                merged.pop(name.split("@", 1)[0] + "@odata.type", None)  # a merged value may change type
            wire = merged | wire
        rows[key] = _Row(wire, self._s._tick())
        return rows[key].ticks

    def query_entities(
        self,
        query_filter: str,
        *,
        parameters: dict[str, Any] | None = None,
        select: str | list[str] | None = None,
        results_per_page: int | None = None,
    ) -> ItemPaged[TableEntity]:
        # Textual substitution, exactly as the SDK does it (so "(x eq @p)" is a KeyError there too).
        parsed = _Filter(_substitute(parameters, query_filter))
        return self._pages(parsed.pred, select, results_per_page, parsed.range)

    def list_entities(
        self, *, select: str | list[str] | None = None, results_per_page: int | None = None
    ) -> ItemPaged[TableEntity]:
        return self._pages(lambda e: True, select, results_per_page, _Range())

    def _pages(
        self, pred: _Pred, select: str | list[str] | None, per_page: int | None, scope: _Range
    ) -> ItemPaged[TableEntity]:
        names, size = _selected(select), per_page or _PAGE
        Page = tuple[dict[str, str] | None, list[TableEntity]]

        def get_next(token: dict[str, str] | None) -> Page:
            # One request per page, evaluated when the page is fetched, as the SDK pages lazily.
            with self._call("table:query"):
                rows, page, start = self._rows(), list[TableEntity](), scope.start()
                if token:
                    start = max(start, _token_start(token))
                budget = self._s.rows_per_scan
                for key in sorted(k for k in rows if k >= start):
                    if scope.past(key):
                        break
                    if scope.before(key):
                        continue
                    if budget is not None and budget <= 0:
                        # The service's scan budget is spent: a short (maybe empty) page whose token names the
                        # next row to look at, matching or not.
                        return {"PartitionKey": _b64(key[0]), "RowKey": _b64(key[1])}, page
                    if budget is not None:
                        budget -= 1
                    self._s.rows_scanned += 1
                    if not pred(_values(rows[key])):
                        continue
                    if len(page) == size:
                        # Azurite's token names the next match (base64 keys); none when nothing follows.
                        return {"PartitionKey": _b64(key[0]), "RowKey": _b64(key[1])}, page
                    page.append(_entity(rows[key], names))
                return None, page

        return ItemPaged(get_next, lambda page: (page[0], iter(page[1])))

    def submit_transaction(self, operations: Iterable[Any]) -> list[dict[str, Any]]:
        # The SDK checks keys, partition, verbs, types and ETag arguments client-side, before the request.
        ops: list[tuple[str, Mapping[str, Any], dict[str, Any], str | None, dict[str, Any]]] = []
        for op in operations:
            kind, entity = str(op[0]).lower(), op[1]
            kw: dict[str, Any] = dict(op[2]) if len(op) > 2 and op[2] else {}
            if "PartitionKey" not in entity or "RowKey" not in entity:
                raise ValueError("PartitionKey and/or RowKey were not provided in entity")
            if ops and entity["PartitionKey"] != ops[0][1]["PartitionKey"]:
                raise ValueError("Partition Keys in the batch must all be the same.")
            if kind not in ("create", "upsert", "update", "delete"):
                raise ValueError(f"Unrecognized operation: {op[0]}")
            conditional = kind in ("update", "delete")
            etag = _etag_for(entity, kw.get("etag"), kw.get("match_condition")) if conditional else None
            ops.append((kind, entity, kw, etag, _to_wire(entity) if kind != "delete" else {}))
        with self._call("table:batch"):
            if not ops:
                raise _bad(500, "InternalError", "Azurite answers an empty batch with 500")
            if len(ops) > 100:
                # Azurite 3.35 answers >100 with a response the SDK cannot parse (BadStatusLine);
                # the real service answers 400 InvalidInput.
                raise _error(TableTransactionError, 400, "InvalidInput", "0:The batch exceeds 100 operations.")
            if sum(len(json.dumps(wire)) + _BATCH_PART_BYTES for *_, wire in ops) > TABLE_BATCH_MAX_BYTES:
                # The service's limit (4 MiB of payload per entity-group transaction); Azurite does not enforce it
                # (Azure/Azurite#1467), so only the fake shows a batch the service refuses.
                raise _error(TableTransactionError, 413, "RequestBodyTooLarge",
                             "0:The request body is too large and exceeds the maximum permissible limit.")
            if self.table_name not in self._s._tables:
                raise _error(TableTransactionError, 404, "TableNotFound", "0:The table specified does not exist.")
            rows = self._s._tables[self.table_name]
            work, seen, results = dict(rows), set(), []  # all or nothing: apply to a copy, commit at the end
            for index, (kind, entity, kw, etag, wire) in enumerate(ops):
                try:
                    if entity["RowKey"] in seen:
                        raise _bad(400, "InvalidDuplicateRow", f"RowKey '{entity['RowKey']}' is already in the batch.")
                    seen.add(entity["RowKey"])
                    key = _key(entity)
                    if kind == "create":
                        if key in work:
                            raise _bad(409, "EntityAlreadyExists")
                        work[key] = _Row(_sized(wire), self._s._tick())
                        results.append({"etag": _etag(work[key].ticks)})
                    elif kind == "delete":
                        if key not in work:
                            raise _bad(404, "ResourceNotFound")
                        if etag is not None and etag != _etag(work[key].ticks):
                            raise _stale(HttpResponseError)
                        del work[key]
                        results.append({})  # Azurite gives no ETag for a delete
                    else:
                        mode = kw.get("mode", UpdateMode.MERGE)
                        results.append(
                            {"etag": _etag(self._write(work, entity, wire, mode, etag, must_exist=kind == "update"))}
                        )
                except HttpResponseError as err:
                    code = getattr(err, "error_code", None)
                    code = str(getattr(code, "value", code) or "")  # a plain string in a batch error
                    raise _error(TableTransactionError, err.status_code or 400, code, f"{index}:{err.reason}") from None
            rows.clear()
            rows.update(work)
            return results


# --------------------------------------------------------------------------- queues


@dataclass
class _Msg:
    id: str
    text: str  # as stored: after the client's encode policy
    inserted: datetime
    expires: datetime | None  # None: time_to_live=-1
    visible: datetime
    seq: int
    pop_receipt: str = field(default_factory=lambda: secrets.token_urlsafe(16))
    dequeue_count: int = 0


def _sec(t: datetime | None) -> datetime | None:
    return None if t is None else t.replace(microsecond=0)  # the service's headers have second precision


def _out_of_range(what: str) -> HttpResponseError:
    return _bad(400, "OutOfRangeQueryParameterValue", f"{what} is out of range")


class FakeQueueClient(_Client):
    """The subset of ``azure.storage.queue.QueueClient`` the platform uses.

    ``message_encode_policy`` / ``message_decode_policy`` work as on the SDK client:
    with ``TextBase64EncodePolicy`` and no decode policy (the platform's set-up) a
    received message's ``content`` is the base64 text, as devhost's listener expects.
    """

    def __init__(
        self, storage: FakeStorage, queue_name: str, *, message_encode_policy: Any = None, message_decode_policy: Any = None,
        meter: TransactionMeter | None = None,
    ) -> None:  # fmt: skip
        self._s, self.queue_name, self._m = storage, queue_name, meter
        self._encode, self._decode = message_encode_policy, message_decode_policy

    def _q(self, empty_op: bool = False) -> dict[str, _Msg]:
        q = self._s._queues.get(self.queue_name)
        if q is None:
            if empty_op:
                self._count("queue:receive-empty")
            raise _nf("QueueNotFound")
        now = self._s.clock.now()
        for mid in [m.id for m in q.values() if m.expires is not None and m.expires <= now]:
            del q[mid]
        return q

    def _visible(self, empty_op: bool = True) -> list[_Msg]:
        # Ordered by the time each became visible, as Azurite does: a redelivery queues behind newer messages.
        now = self._s.clock.now()
        return sorted((m for m in self._q(empty_op).values() if m.visible <= now), key=lambda m: (m.visible, m.seq))

    def _text(self, content: Any) -> str:
        text = self._encode.encode(content) if self._encode is not None else content
        if not isinstance(text, str):
            raise TypeError("Message content must be text; use an encode policy for bytes")
        if len(text.encode("utf-8")) > _MAX_QUEUE_TEXT:
            raise _bad(413, "RequestBodyTooLarge")
        return text

    def _message(self, m: _Msg, *, peek: bool = False) -> QueueMessage:
        content = self._decode.decode(m.text, None) if self._decode is not None else m.text
        return QueueMessage(
            content=content, id=m.id, inserted_on=_sec(m.inserted), expires_on=_sec(m.expires),
            dequeue_count=m.dequeue_count, pop_receipt=None if peek else m.pop_receipt,
            next_visible_on=None if peek else _sec(m.visible),
        )  # fmt: skip

    def create_queue(self) -> None:
        with self._call("queue:put-queue"):
            if self.queue_name in self._s._queues:
                # An existing queue answers 204, which the SDK raises as ResourceExistsError.
                raise _error(ResourceExistsError, 204, "QueueAlreadyExists")
            self._s._queues[self.queue_name] = {}

    def delete_queue(self) -> None:
        with self._call("queue:delete-queue"):
            self._q()
            del self._s._queues[self.queue_name]

    def send_message(
        self, content: Any, *, visibility_timeout: int | None = None, time_to_live: int | None = None
    ) -> QueueMessage:
        with self._call("queue:send"):
            q, text, now = self._q(), self._text(content), self._s.clock.now()
            ttl = _MAX_TTL if time_to_live is None else timedelta(seconds=time_to_live)
            delay = timedelta(seconds=visibility_timeout or 0)
            if not timedelta() <= delay <= _MAX_TTL or (time_to_live != -1 and delay >= ttl):
                raise _bad(400, "InvalidQueryParameterValue", "visibilitytimeout is out of range")
            self._s._seq += 1
            m = _Msg(str(uuid.uuid4()), text, now, None if time_to_live == -1 else now + ttl, now + delay, self._s._seq)
            q[m.id] = m
            return QueueMessage(
                content=content, id=m.id, inserted_on=_sec(now), expires_on=_sec(m.expires),
                pop_receipt=m.pop_receipt, next_visible_on=_sec(m.visible),
            )  # fmt: skip

    def _receive(self, count: int, visibility_timeout: int | None) -> list[QueueMessage]:
        seconds = 30 if visibility_timeout is None else visibility_timeout
        with self._call():
            if not 1 <= count <= 32 or not 1 <= seconds <= 7 * 86400:
                self._count("queue:receive-empty")  # an answer without messages, as the meter counts it
                raise _out_of_range("numofmessages" if not 1 <= count <= 32 else "visibilitytimeout")
            ready, now = self._visible()[:count], self._s.clock.now()
            self._count("queue:receive" if ready else "queue:receive-empty")
            for m in ready:
                m.dequeue_count += 1
                m.pop_receipt = secrets.token_urlsafe(16)
                m.visible = now + timedelta(seconds=seconds)
            return [self._message(m) for m in ready]

    def receive_message(self, *, visibility_timeout: int | None = None) -> QueueMessage | None:
        got = self._receive(1, visibility_timeout)
        return got[0] if got else None

    def receive_messages(
        self, *, messages_per_page: int | None = None, visibility_timeout: int | None = None, max_messages: int | None = None
    ) -> ItemPaged[QueueMessage]:  # fmt: skip
        # Lazy pages like the SDK's MessagesPaged: each page is one receive, until empty or max_messages.
        left = [max_messages]

        def get_next(_token: str | None) -> list[QueueMessage]:
            per_page = messages_per_page
            if left[0] is not None:
                if left[0] < 1:
                    return []
                per_page = min(per_page or 1, left[0])
            page = self._receive(per_page or 1, visibility_timeout)
            if left[0] is not None:
                left[0] -= len(page)
            return page

        def extract(page: list[QueueMessage]) -> tuple[Any, Iterator[QueueMessage]]:
            if not page:
                raise StopIteration("End of paging")
            return "TOKEN_IGNORED", iter(page)

        return ItemPaged(get_next, extract)

    def update_message(
        self, message: str | QueueMessage, pop_receipt: str | None = None, content: Any = None, *,
        visibility_timeout: int | None = None,
    ) -> QueueMessage:  # fmt: skip
        if isinstance(message, QueueMessage):
            # The SDK re-sends message.content when no content is given (and encodes it again).
            mid, content, receipt = message.id, content or message.content, pop_receipt or message.pop_receipt
        else:
            mid, receipt = message, pop_receipt
        if receipt is None:
            raise ValueError("pop_receipt must be present")
        with self._call("queue:update"):
            m = self._owned(mid, receipt)
            if not 0 <= (visibility_timeout or 0) <= 7 * 86400:
                raise _out_of_range("visibilitytimeout")
            if content is not None:
                m.text = self._text(content)
            m.pop_receipt = secrets.token_urlsafe(16)
            m.visible = self._s.clock.now() + timedelta(seconds=visibility_timeout or 0)
            return QueueMessage(
                content=content, id=mid, pop_receipt=m.pop_receipt, next_visible_on=_sec(m.visible),
                inserted_on=getattr(message, "inserted_on", None), expires_on=getattr(message, "expires_on", None),
                dequeue_count=getattr(message, "dequeue_count", None),
            )  # fmt: skip

    def delete_message(self, message: str | QueueMessage, pop_receipt: str | None = None) -> None:
        mid = message.id if isinstance(message, QueueMessage) else message
        receipt = pop_receipt or (message.pop_receipt if isinstance(message, QueueMessage) else None)
        if receipt is None:
            raise ValueError("pop_receipt must be present")
        with self._call("queue:delete"):
            self._owned(mid, receipt)
            del self._s._queues[self.queue_name][mid]

    def _owned(self, mid: str, receipt: str) -> _Msg:
        m = self._q().get(mid)
        if m is None:
            raise _nf("MessageNotFound")
        if m.pop_receipt != receipt:
            raise _bad(400, "PopReceiptMismatch")
        return m

    def peek_messages(self, max_messages: int | None = None) -> list[QueueMessage]:
        if max_messages is not None and not 1 <= max_messages <= 32:
            raise ValueError("Number of messages to peek should be between 1 and 32")
        with self._call():
            ready = self._visible()[: max_messages or 1]
            self._count("queue:receive" if ready else "queue:receive-empty")  # a GET on /messages, as receive
            return [self._message(m, peek=True) for m in ready]

    def get_queue_properties(self) -> QueueProperties:
        with self._call("queue:get-metadata"):
            props = QueueProperties(metadata={})
            props.name, props.approximate_message_count = self.queue_name, len(self._q())  # invisible ones count too
            return props

    def clear_messages(self) -> None:
        with self._call("queue:clear"):
            self._q().clear()


# --------------------------------------------------------------------------- blobs


@dataclass
class _Lease:
    id: str
    expires: datetime | None  # None: infinite (-1)
    broken_at: datetime | None = None

    def state(self, now: datetime) -> str:
        if self.broken_at is not None:
            return "breaking" if now < self.broken_at else "broken"
        return "leased" if self.expires is None or now < self.expires else "expired"


@dataclass
class _Blob:
    data: bytes
    content_type: str
    etag: str
    modified: datetime
    lease: _Lease | None = None

    def leased(self, now: datetime) -> _Lease | None:
        """The lease that blocks writes without its id (an active or breaking one)."""
        return self.lease if self.lease is not None and self.lease.state(now) in ("leased", "breaking") else None


@dataclass
class _Part:
    status_code: int


def _props(name: str, b: _Blob) -> BlobProperties:
    p = BlobProperties(name=name)
    p.size, p.etag, p.last_modified = len(b.data), b.etag, b.modified
    p.content_settings = ContentSettings(content_type=b.content_type)
    return p


class _Download:
    def __init__(self, blob: _Blob, name: str, encoding: str | None) -> None:
        self._data, self._encoding, self.name, self.properties = blob.data, encoding, name, _props(name, blob)

    def readall(self) -> Any:
        return self._data.decode(self._encoding) if self._encoding else self._data


def _data(data: Any) -> bytes:
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data)
    return _data(data.read()) if hasattr(data, "read") else b"".join(_data(part) for part in data)


class FakeContainerClient(_Client):
    """The subset of ``azure.storage.blob.ContainerClient`` the platform uses."""

    def __init__(self, storage: FakeStorage, container_name: str, meter: TransactionMeter | None = None) -> None:
        self._s, self.container_name, self._m = storage, container_name, meter

    def _blobs(self) -> dict[str, _Blob]:
        c = self._s._containers.get(self.container_name)
        if c is None:
            raise _nf("ContainerNotFound")
        return c

    def create_container(self) -> dict[str, Any]:
        with self._call("blob:put"):
            if self.container_name in self._s._containers:
                raise _error(ResourceExistsError, 409, "ContainerAlreadyExists")
            self._s._containers[self.container_name] = {}
            return {"etag": f'"0x{self._s._tick():X}"', "last_modified": _sec(self._s.clock.now())}

    def delete_container(self) -> None:
        with self._call("blob:delete"):
            self._blobs()
            del self._s._containers[self.container_name]

    def exists(self) -> bool:
        with self._call("blob:get"):
            return self.container_name in self._s._containers

    def get_blob_client(self, blob: str) -> FakeBlobClient:
        return FakeBlobClient(self, blob)

    def upload_blob(self, name: str, data: Any, **kwargs: Any) -> FakeBlobClient:
        client = self.get_blob_client(name)
        client.upload_blob(data, **kwargs)
        return client

    def download_blob(self, blob: str, **kwargs: Any) -> _Download:
        return self.get_blob_client(blob).download_blob(**kwargs)

    def delete_blob(self, blob: str, **kwargs: Any) -> None:
        self.get_blob_client(blob).delete_blob(**kwargs)

    def list_blobs(self, name_starts_with: str | None = None) -> Iterator[BlobProperties]:
        with self._call("blob:get"):
            blobs = self._blobs()
            return iter([_props(n, blobs[n]) for n in sorted(blobs) if n.startswith(name_starts_with or "")])

    def list_blob_names(self, name_starts_with: str | None = None) -> Iterator[str]:
        return (p.name for p in self.list_blobs(name_starts_with=name_starts_with))

    def delete_blobs(self, *blobs: str) -> Iterator[Any]:
        """One batch request; as with the SDK a missing (or leased) blob raises PartialBatchErrorException
        (status 202) after the others were deleted."""
        if not blobs:
            return iter([])
        with self._call("blob:post"):
            container, now = self._blobs(), self._s.clock.now()
            parts = []
            for name in blobs:
                b = container.get(name)
                parts.append(_Part(404 if b is None else 412 if b.leased(now) else 202))
                if parts[-1].status_code == 202:
                    del container[name]
            if any(p.status_code != 202 for p in parts):
                partial = cast(Callable[[str, Any, list[Any]], PartialBatchErrorException], PartialBatchErrorException)
                err = partial("There is a partial failure in the batch operation.", None, parts)
                err.status_code = 202
                raise err
            return iter(parts)


class FakeBlobClient(_Client):
    """``BlobClient``: upload / download / delete / exists, and leases for devhost's timer lock."""

    def __init__(self, container: FakeContainerClient, blob_name: str) -> None:
        self._c, self._s, self.container_name, self.blob_name = (
            container,
            container._s,
            container.container_name,
            blob_name,
        )
        self._m = container._m

    def _get(self) -> _Blob:
        b = self._c._blobs().get(self.blob_name)
        if b is None:
            raise _nf("BlobNotFound")
        return b

    def _check_lease(self, b: _Blob, lease: Any) -> None:
        lease_id, active = getattr(lease, "id", lease), b.leased(self._s.clock.now())
        if active and lease_id is None:
            raise _bad(412, "LeaseIdMissing")
        if lease_id is not None and (active is None or active.id != lease_id):
            raise _bad(412, "LeaseIdMismatchWithBlobOperation" if active else "LeaseNotPresentWithBlobOperation")

    def exists(self) -> bool:
        with self._call("blob:head"):
            return self.blob_name in self._s._containers.get(self.container_name, {})

    def upload_blob(
        self, data: Any, *, overwrite: bool = False, content_settings: ContentSettings | None = None, lease: Any = None,
        **_: Any,
    ) -> dict[str, Any]:  # fmt: skip
        body = _data(data)
        with self._call("blob:put"):
            blobs, now = self._c._blobs(), self._s.clock.now()
            old = blobs.get(self.blob_name)
            if old is not None and not overwrite:
                raise _error(ResourceExistsError, 409, "BlobAlreadyExists")
            if old is not None:
                self._check_lease(old, lease)
            content_type = (content_settings.content_type if content_settings else None) or "application/octet-stream"
            # Writing under an active lease keeps it; any other write ends an expired or broken one.
            kept = old.leased(now) if old is not None else None
            blobs[self.blob_name] = _Blob(body, content_type, f'"0x{self._s._tick():X}"', now, kept)
            return {"etag": blobs[self.blob_name].etag, "last_modified": _sec(now)}

    def download_blob(self, *, encoding: str | None = None, **_: Any) -> _Download:
        with self._call("blob:get"):
            return _Download(self._get(), self.blob_name, encoding)

    def delete_blob(self, *, lease: Any = None, **_: Any) -> None:
        with self._call("blob:delete"):
            self._check_lease(self._get(), lease)
            del self._c._blobs()[self.blob_name]

    def acquire_lease(self, lease_duration: int = -1, lease_id: str | None = None) -> FakeBlobLease:
        lease = FakeBlobLease(self, lease_id)
        lease.acquire(lease_duration)
        return lease


class FakeBlobLease(_Client):
    """``BlobLeaseClient``. After :meth:`release` the id is None, so a later renew raises
    ValueError client-side, as the SDK's does."""

    def __init__(self, client: FakeBlobClient, lease_id: str | None = None) -> None:
        self._b, self._s, self._m = client, client._s, client._m
        self.id: str | None = lease_id or str(uuid.uuid4())
        self.etag: str | None = None
        self.last_modified: datetime | None = None
        self._duration = -1

    def _blob(self) -> _Blob:
        if self.id is None:
            raise ValueError("No value for given attribute")
        b = self._b._get()
        self.etag, self.last_modified = b.etag, _sec(b.modified)
        return b

    def _mine(self, b: _Blob) -> _Lease:
        if b.lease is None or b.lease.id != self.id:
            code = "LeaseNotPresentWithLeaseOperation" if b.lease is None else "LeaseIdMismatchWithLeaseOperation"
            raise _error(ResourceExistsError, 409, code)
        return b.lease

    def _expiry(self, seconds: int) -> datetime | None:
        return None if seconds == -1 else self._s.clock.now() + timedelta(seconds=seconds)

    def acquire(self, lease_duration: int = -1) -> None:
        with self._call("blob:put"):
            if lease_duration != -1 and not 15 <= lease_duration <= 60:
                raise _bad(400, "InvalidHeaderValue", "A lease lasts -1 or 15-60 seconds.")
            b = self._blob()
            held = b.leased(self._s.clock.now())
            if held is not None and held.id != self.id:
                raise _error(ResourceExistsError, 409, "LeaseAlreadyPresent")
            self._duration = lease_duration
            b.lease = _Lease(cast(str, self.id), self._expiry(lease_duration))

    def renew(self) -> None:
        with self._call("blob:put"):
            lease = self._mine(self._blob())
            if lease.broken_at is not None:
                raise _error(ResourceExistsError, 409, "LeaseIsBrokenAndCannotBeRenewed")
            lease.expires = self._expiry(self._duration)  # an expired lease nobody took is renewable, as in Azure

    def release(self) -> None:
        with self._call("blob:put"):
            b = self._blob()
            self._mine(b)
            b.lease, self.id = None, None

    def break_lease(self, lease_break_period: int | None = None) -> int:
        with self._call("blob:put"):
            b, now = self._blob(), self._s.clock.now()
            if b.lease is None or b.lease.state(now) == "expired":
                raise _error(ResourceExistsError, 409, "LeaseNotPresentWithLeaseOperation")
            remaining = b.lease.expires - now if b.lease.expires is not None else timedelta(days=1)
            period = remaining if lease_break_period is None else timedelta(seconds=lease_break_period)
            b.lease.broken_at = b.lease.broken_at or now + max(timedelta(), min(period, remaining))
            return max(0, int((b.lease.broken_at - now).total_seconds()))


# --------------------------------------------------------------------------- the bundle


class FakeStorage:
    """One fake storage account: tables, queues and containers, a clock, an operation count.

    ``table(name)``, ``queue(name)`` and ``container(name)`` return one client per
    name, creating the resource on first use (as shared.storage.connections does);
    ``create=False`` leaves a missing one missing, so its calls answer 404.
    """

    def __init__(self, clock: FakeClock | None = None) -> None:
        self.clock = clock or FakeClock()
        self.lock = threading.RLock()  # one lock: every call is atomic, as one request to Storage is
        self._tables: dict[str, dict[tuple[str, str], _Row]] = {}
        self._queues: dict[str, dict[str, _Msg]] = {}
        self._containers: dict[str, dict[str, _Blob]] = {}
        self._ops: Counter[str] = Counter()
        self._clients: dict[tuple[str, str, TransactionMeter | None], Any] = {}
        self._last_tick = self._seq = 0
        #: None (Azurite: a page holds ``results_per_page`` matches whatever it scans), or how many rows one
        #: query request may look at: the real Table service stops a request after 1,000 rows scanned (or 5 s)
        #: and answers a short or empty page with a continuation token, which a filtered query must follow.
        self.rows_per_scan: int | None = None
        #: Rows the queries so far looked at (matching or not, inside their filters' key ranges: ``_Range``), what
        #: the real service reads for them; Azurite does not say. ``reset_ops`` sets it back to 0.
        self.rows_scanned = 0

    @contextmanager
    def call(self, op: str | None = None, meter: TransactionMeter | None = None) -> Iterator[None]:
        """One request: counted (whatever its answer, on ``meter`` too) and run under the lock."""
        with self.lock:
            if op is not None:
                self.count(op, meter)
            yield

    def count(self, op: str, meter: TransactionMeter | None = None) -> None:
        """Count one request ``op`` on the account, and on ``meter``: the meter of the client that made it."""
        with self.lock:
            self._ops[op] += 1
        if meter is not None:
            meter.add(op)

    def _tick(self) -> int:
        """A fresh timestamp in 100 ns units: strictly increasing, so a frozen clock still changes ETags."""
        now = self.clock.now() - _EPOCH
        self._last_tick = max((now.days * 86400 + now.seconds) * 10**7 + now.microseconds * 10, self._last_tick + 1)
        return self._last_tick

    def _client(
        self, kind: str, name: str, make: Callable[[], _C], store: dict[str, Any], create: Callable[[_C], object] | None,
        meter: TransactionMeter | None = None,
    ) -> _C:  # fmt: skip
        key = (kind, name, meter)  # one client per name and meter: each platform's requests go on its own meter
        with self.lock:
            client: _C = self._clients.get(key) or self._clients.setdefault(key, make())
            if create is not None and name not in store:
                create(client)
            return client

    def table(self, name: str, *, create: bool = True, meter: TransactionMeter | None = None) -> FakeTableClient:
        """The table's client (requests also counted on ``meter``, if given)."""
        make = lambda: FakeTableClient(self, name, meter)  # noqa: E731
        return self._client("table", name, make, self._tables, FakeTableClient.create_table if create else None, meter)

    def queue(self, name: str, *, create: bool = True, meter: TransactionMeter | None = None) -> FakeQueueClient:
        """The platform's queue client: TextBase64EncodePolicy, no decode policy (see shared.storage.connections)."""
        make = lambda: FakeQueueClient(self, name, message_encode_policy=TextBase64EncodePolicy(), meter=meter)  # noqa: E731
        return self._client("queue", name, make, self._queues, FakeQueueClient.create_queue if create else None, meter)

    def container(self, name: str, *, create: bool = True, meter: TransactionMeter | None = None) -> FakeContainerClient:
        """The container's client (requests also counted on ``meter``, if given)."""
        make, created = (
            (lambda: FakeContainerClient(self, name, meter)),
            FakeContainerClient.create_container if create else None,
        )
        return self._client("blob", name, make, self._containers, created, meter)

    def raw_queue(self, name: str) -> FakeQueueClient:
        """A client with no encode or decode policy, like devhost.storage.queue()."""
        return FakeQueueClient(self, name)

    # TableServiceClient-like, for code that takes a service.
    def get_table_client(self, table_name: str) -> FakeTableClient:
        return self.table(table_name, create=False)

    def create_table_if_not_exists(self, table_name: str) -> FakeTableClient:
        return self.table(table_name)

    def ops(self) -> Counter[str]:
        """Requests so far, keyed like shared metering (``table:merge``, ``queue:receive-empty``, ``blob:put``...)."""
        with self.lock:
            return Counter(self._ops)

    def reset_ops(self) -> None:
        with self.lock:
            self._ops.clear()
            self.rows_scanned = 0


__all__ = [
    "FakeBlobClient",
    "FakeBlobLease",
    "FakeClock",
    "FakeContainerClient",
    "FakeQueueClient",
    "FakeStorage",
    "FakeTableClient",
]
