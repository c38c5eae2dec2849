"""Cache of validated LLM responses in Table Storage, keyed by "model + prompt".

A job that is re-delivered, retried or resumed sends the same prompts again;
answering them from this table means it does not pay (in money, latency or
token budget) a second time. The key is the sha256 of everything that decides
the answer (see :func:`cache_key`), so a changed prompt, schema, model, API
version, temperature or ``max_tokens`` is a miss, never a wrong hit.

Layout: table ``LLM_CACHE_TABLE``; ``PartitionKey`` = first two hex digits of
the hash (256 partitions spread the load), ``RowKey`` = the full hash. The
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
from datetime import UTC, datetime
from typing import Any, Final

from azure.core.exceptions import ResourceExistsError, ResourceNotFoundError
from azure.data.tables import TableClient, UpdateMode

from shared.config.constants import MAX_STRING_PROPERTY_CHARS
from shared.config.settings import raw

log = logging.getLogger(__name__)

#: Bumped when the key recipe or the entity layout changes, so old rows are ignored.
KEY_VERSION: Final = 1
#: An entity holds at most 1 MiB; strings count two bytes per UTF-16 unit. 15
#: chunks of 30k units stay well inside it with room for the other properties.
MAX_CHUNKS: Final = 15
#: After a Storage failure, skip the cache for this long (seconds).
BACKOFF_SECONDS: Final = 30.0

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
        self.hits += 1
        return hit

    def put(self, key: str, value: CachedResponse, *, purpose: str = "") -> None:
        """Store ``value`` under ``key``; failures are logged and ignored."""
        if not self._available():
            return
        chunks = split_chunks(value.content)
        if len(chunks) > MAX_CHUNKS:
            log.warning("llm cache skip: response too large (%d chunks) purpose=%s", len(chunks), purpose)
            return
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
