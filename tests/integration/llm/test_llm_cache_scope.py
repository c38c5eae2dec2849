"""The LLM cache is per tenant and forgets with RETENTION_DAYS (issue 12: no cross-tenant hit oracle, no derived
content outliving the jobs), against a real Azurite."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta

import pytest
from azure.data.tables import TableClient, UpdateMode

from shared.llm import cache as cache_mod
from shared.llm.cache import CachedResponse, LLMCache, cache_key, scoped_key
from shared.observability import telemetry

KEY = cache_key(provider="openai", model="m", api_version="", messages=[{"role": "user", "content": "label these"}],
                schema_name="S", json_schema={}, temperature=0.0, max_tokens=10)
ANSWER = CachedResponse('{"label": "Delivery"}', "m", 5, 7)


@pytest.fixture
def table(azurite: str) -> TableClient:
    t = TableClient.from_connection_string(azurite, f"llmcache{secrets.token_hex(4)}")
    t.create_table()
    return t


def test_one_tenants_answer_is_not_a_hit_for_another(table: TableClient) -> None:
    cache = LLMCache(table)
    with telemetry.job_context(tenant="t-alpha"):
        cache.put(KEY, ANSWER)
        assert cache.get(KEY) == ANSWER
    with telemetry.job_context(tenant="t-beta"):
        assert cache.get(KEY) is None, "t-beta can tell that t-alpha sent this prompt"
    assert cache.get(KEY) is None, "outside a job nothing is shared either"
    assert scoped_key(KEY, "t-alpha") != scoped_key(KEY, "t-beta") != KEY
    # The row is filed under the scoped key only: the plain prompt hash is not in the table.
    rows = [e["RowKey"] for e in table.list_entities()]
    assert rows == [scoped_key(KEY, "t-alpha")]


def test_the_pipeline_process_scope_wins_when_set(table: TableClient, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache_mod, "_process_scope", None)
    cache = LLMCache(table)
    cache_mod.set_cache_scope("t-gamma")
    cache.put(KEY, ANSWER)
    assert cache.get(KEY) == ANSWER
    with telemetry.job_context(tenant="t-alpha"):
        assert cache_mod.current_scope() == "t-gamma"


def test_rows_older_than_retention_are_misses_and_get_swept(
    table: TableClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RETENTION_DAYS", "30")
    cache = LLMCache(table)
    with telemetry.job_context(tenant="t-alpha"):
        cache.put(KEY, ANSWER)
        row = scoped_key(KEY)
        entity = table.get_entity(row[:2], row)
        entity["cached_at"] = datetime.now(UTC) - timedelta(days=31)
        table.upsert_entity(entity, mode=UpdateMode.REPLACE)
        assert cache.get(KEY) is None and cache.expired == 1
        # Another write to the same partition deletes the expired row (a fresh cache: a new process).
        other = next(k for k in (f"{i:064x}" for i in range(10_000)) if scoped_key(k)[:2] == row[:2])
        LLMCache(table).put(other, ANSWER)
    left = {e["RowKey"] for e in table.list_entities()}
    assert row not in left and scoped_key(other, "t-alpha") in left


def test_retention_zero_keeps_rows(table: TableClient, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RETENTION_DAYS", "0")
    cache = LLMCache(table)
    cache.put(KEY, ANSWER)
    row = scoped_key(KEY)
    entity = table.get_entity(row[:2], row)
    entity["cached_at"] = datetime.now(UTC) - timedelta(days=3650)
    table.upsert_entity(entity, mode=UpdateMode.REPLACE)
    assert cache.get(KEY) == ANSWER
