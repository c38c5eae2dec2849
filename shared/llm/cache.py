"""Cache of validated LLM responses in Table Storage, keyed by "model + prompt".

A job that is re-delivered, retried or resumed sends the same prompts again;
answering them from this table means it does not pay (in money, latency or
token budget) a second time. The key is the sha256 of everything that decides
the answer (see :func:`cache_key`), so a changed prompt, schema, model, API
version, temperature or ``max_tokens`` is a miss, never a wrong hit.

**Per tenant, and not forever.** The row key is the sha256 of the tenant and
that key, so one tenant's prompts can never be answered from (or probe for)
another tenant's rows: the cache is not a cross-tenant hit oracle. The tenant is
the one the pipeline process runs for (:func:`set_cache_scope`, or the job's
log context in-process); without one, rows are filed under an empty scope that
no job uses. Rows older than ``RETENTION_DAYS`` are a miss, and each process
deletes the expired rows of a partition when it writes to it (at most once per
partition and hour), so derived content does not outlive the jobs it came from.

Layout: table ``LLM_CACHE_TABLE``; ``PartitionKey`` = first two hex digits of
the scoped hash (256 partitions spread the load), ``RowKey`` = the scoped hash. The
response text is stored in the entity itself, split over ``content``,
``content_1``, ``content_2``, ... when longer than one string property may
hold. A blob would add a second round trip and a container dependency for a
case (a completion > 30k characters) that ``max_tokens`` all but rules out.

The cache is best effort: every Storage failure is logged (never with the
content) and treated as a miss, and after a failure the cache stays quiet for
a short while so an outage does not add a timeout to every LLM call.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from azure.core.exceptions import ResourceExistsError, ResourceNotFoundError
from azure.data.tables import TableClient, UpdateMode

from shared.config.constants import MAX_STRING_PROPERTY_CHARS
from shared.config.settings import raw
from shared.observability import telemetry

log = logging.getLogger(__name__)

#: Bumped when the key recipe or the entity layout changes, so old rows are ignored.
KEY_VERSION: Final = 1
#: An entity holds at most 1 MiB; strings count two bytes per UTF-16 unit. 15
#: chunks of 30k units stay well inside it with room for the other properties.
MAX_CHUNKS: Final = 15
#: After a Storage failure, skip the cache for this long (seconds).
BACKOFF_SECONDS: Final = 30.0
#: A process sweeps one partition's expired rows at most this often (seconds), at most this many per sweep.
SWEEP_EVERY_SECONDS: Final = 3600.0
SWEEP_MAX_ROWS: Final = 50

_process_scope: str | None = None


def set_cache_scope(tenant: str | None) -> None:
    """The tenant this process caches for: the pipeline process sets it once, before the pipeline runs
    (``shared.llm.scope_to_job``); None goes back to the job's log context."""
    global _process_scope
    _process_scope = tenant


def current_scope() -> str:
    """The tenant the cache is scoped to: the process's (:func:`set_cache_scope`), else the job's log context,
    else ``""``."""
    if _process_scope is not None:
        return _process_scope
    return str(telemetry.current_job_field("tenant") or "")


def scoped_key(key: str, scope: str | None = None) -> str:
    """The row key of ``key`` for a tenant: sha256 of both, so equal prompts of two tenants never share a row."""
    tenant = current_scope() if scope is None else scope
    return hashlib.sha256(f"v{KEY_VERSION}\x00{tenant}\x00{key}".encode()).hexdigest()


def _retention() -> timedelta | None:
    try:
        days = float(raw("RETENTION_DAYS"))
    except ValueError:
        return None
    return timedelta(days=days) if days > 0 else None

# Tables this process has created (or found to exist), so creation costs at most
# one call per table per process.
_created: set[str] = set()
_created_lock = threading.Lock()


@dataclass(frozen=True)
class CachedResponse:
    """One validated answer: the raw JSON text the model produced, plus what it cost then."""

    content: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


def cache_key(
    *,
    provider: str,
    model: str,
    api_version: str,
    messages: Sequence[Mapping[str, str]],
    schema_name: str,
    json_schema: Mapping[str, Any],
    temperature: float,
    max_tokens: int,
) -> str:
    """sha256 (hex) of everything that determines the model's answer."""
    payload = {
        "v": KEY_VERSION,
        "provider": provider,
        "model": model,
        "api_version": api_version,
        "messages": [dict(m) for m in messages],
        "schema_name": schema_name,
        "json_schema": json_schema,
        "temperature": temperature,
        "max_tokens": max_tokens,
    }
    # sort_keys + fixed separators make the text (and so the hash) canonical.
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _utf16_len(ch: str) -> int:
    return 2 if ord(ch) > 0xFFFF else 1


def split_chunks(text: str, limit: int = MAX_STRING_PROPERTY_CHARS) -> list[str]:
    """Split ``text`` so that each piece is at most ``limit`` UTF-16 code units.

    Table Storage limits a string property to 64 KiB, i.e. 32k UTF-16 units; a
    character outside the BMP (emoji) takes two, so counting characters is not enough.
    """
    if len(text) <= limit // 2:
        return [text]
    chunks: list[str] = []
    start = 0
    units = 0
    for i, ch in enumerate(text):
        n = _utf16_len(ch)
        if units + n > limit:
            chunks.append(text[start:i])
            start, units = i, 0
        units += n
    chunks.append(text[start:])
    return chunks


def _prop(i: int) -> str:
    return "content" if i == 0 else f"content_{i}"


class LLMCache:
    """Best-effort response cache over one table.

    ``table`` is a :class:`TableClient` or a zero-argument factory for one; the
    factory is called on first use, so building a cache does no I/O and a
    Storage outage at start-up only disables caching instead of failing.
    """

    def __init__(self, table: TableClient | Callable[[], TableClient]) -> None:
        self._table: TableClient | None = table if isinstance(table, TableClient) else None
        self._factory: Callable[[], TableClient] | None = None if isinstance(table, TableClient) else table
        self._quiet_until = 0.0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self.errors = 0
        self.expired = 0
        self._swept: dict[str, float] = {}

    @classmethod
    def from_settings(cls) -> LLMCache | None:
        """The cache on table ``LLM_CACHE_TABLE``; None when that setting is empty."""
        name = raw("LLM_CACHE_TABLE")
        if not name:
            return None
        return cls(lambda: _table_from_settings(name))

    # -- Storage access -------------------------------------------------------

    def _client(self) -> TableClient:
        with self._lock:
            if self._table is None:
                assert self._factory is not None
                self._table = self._factory()
            return self._table

    def _available(self) -> bool:
        return time.monotonic() >= self._quiet_until

    def _failed(self, op: str, err: BaseException) -> None:
        self.errors += 1
        self._quiet_until = time.monotonic() + BACKOFF_SECONDS
        # The type and status only: an SDK message could quote the entity.
        status = getattr(err, "status_code", None)
        log.warning("llm cache %s failed (%s, status=%s); continuing without cache for %.0f s",
                    op, type(err).__name__, status, BACKOFF_SECONDS)

    def get(self, key: str) -> CachedResponse | None:
        """The cached answer for ``key``, or None (a miss, or the cache is unavailable)."""
        if not self._available():
            return None
        key = scoped_key(key)
        try:
            entity = self._client().get_entity(partition_key=key[:2], row_key=key)
        except ResourceNotFoundError:
            # Either the row or the whole table is missing: both are a miss.
            self.misses += 1
            return None
        except Exception as err:  # noqa: BLE001 - the cache must never fail the call
            self._failed("get", err)
            return None
        try:
            chunks = int(entity.get("chunks", 1))
            content = "".join(str(entity[_prop(i)]) for i in range(chunks))
            hit = CachedResponse(
                content=content,
                model=str(entity.get("model", "")),
                prompt_tokens=int(entity.get("prompt_tokens", 0)),
                completion_tokens=int(entity.get("completion_tokens", 0)),
            )
        except (KeyError, TypeError, ValueError) as err:
            self._failed("decode", err)
            return None
        if self._is_expired(entity.get("cached_at")):
            self.expired += 1
            self.misses += 1
            return None
        self.hits += 1
        return hit

    @staticmethod
    def _is_expired(cached_at: Any) -> bool:
        keep = _retention()
        if keep is None:
            return False
        if not isinstance(cached_at, datetime):
            return True  # a row without a date cannot prove it is fresh
        when = cached_at if cached_at.tzinfo else cached_at.replace(tzinfo=UTC)
        return datetime.now(UTC) - when > keep

    def put(self, key: str, value: CachedResponse, *, purpose: str = "") -> None:
        """Store ``value`` under ``key``; failures are logged and ignored."""
        if not self._available():
            return
        chunks = split_chunks(value.content)
        if len(chunks) > MAX_CHUNKS:
            log.warning("llm cache skip: response too large (%d chunks) purpose=%s", len(chunks), purpose)
            return
        key = scoped_key(key)
        entity: dict[str, Any] = {
            "PartitionKey": key[:2],
            "RowKey": key,
            "model": value.model,
            "purpose": purpose[:200],
            "prompt_tokens": value.prompt_tokens,
            "completion_tokens": value.completion_tokens,
            "chunks": len(chunks),
            "cached_at": datetime.now(UTC),
        }
        for i, chunk in enumerate(chunks):
            entity[_prop(i)] = chunk
        try:
            table = self._client()
            try:
                # Upsert: two workers answering the same prompt write equivalent rows.
                table.upsert_entity(entity, mode=UpdateMode.REPLACE)
            except ResourceNotFoundError:
                # The table does not exist yet: create it once, then write again.
                self._ensure_table(table)
                table.upsert_entity(entity, mode=UpdateMode.REPLACE)
        except Exception as err:  # noqa: BLE001 - the cache must never fail the call
            self._failed("put", err)
            return
        self._sweep(key[:2])

    def _sweep(self, partition: str) -> None:
        """Delete up to SWEEP_MAX_ROWS expired rows of ``partition``, at most once an hour per process."""
        keep = _retention()
        now = time.monotonic()
        if keep is None or now - self._swept.get(partition, -SWEEP_EVERY_SECONDS) < SWEEP_EVERY_SECONDS:
            return
        self._swept[partition] = now
        cutoff = datetime.now(UTC) - keep
        try:
            table = self._client()
            rows = table.query_entities(
                "PartitionKey eq @pk and cached_at lt @cutoff",
                parameters={"pk": partition, "cutoff": cutoff},
                select=["PartitionKey", "RowKey"],
                results_per_page=SWEEP_MAX_ROWS,
            )
            for n, row in enumerate(rows):
                if n >= SWEEP_MAX_ROWS:
                    break
                try:
                    table.delete_entity(row["PartitionKey"], row["RowKey"])
                except ResourceNotFoundError:
                    pass
        except Exception as err:  # noqa: BLE001 - the cache must never fail the call
            self._failed("sweep", err)

    @staticmethod
    def _ensure_table(table: TableClient) -> None:
        marker = f"{table.url}|{table.table_name}"
        with _created_lock:
            if marker in _created:
                return
            try:
                table.create_table()
            except ResourceExistsError:
                pass
            _created.add(marker)


def _table_from_settings(name: str) -> TableClient:
    # Prefer the shared, metered clients; fall back to a plain connection-string
    # client so this module also works where shared.storage.connections is absent.
    try:
        from shared.storage import connections
    except ImportError:
        connections = None  # type: ignore[assignment]
    getter = getattr(connections, "table_service", None) if connections is not None else None
    if getter is not None:
        # table_service() rather than get_table_client(): the latter creates the
        # table eagerly, and a read-only (all hits) job never needs it created.
        service = getter()
        return service.get_table_client(name)  # type: ignore[no-any-return]
    conn = raw("AzureWebJobsStorage")
    if not conn:
        raise RuntimeError("Storage is not configured for the LLM cache")
    return TableClient.from_connection_string(
        conn, name, retry_total=2, retry_backoff_factor=0.5, connection_timeout=5, read_timeout=30
    )
