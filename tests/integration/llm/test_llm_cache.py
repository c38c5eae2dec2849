"""The LLM response cache against a real Azurite: hits send nothing and cost nothing, across processes."""

from __future__ import annotations

import secrets

import pytest
from azure.data.tables import TableClient
from pydantic import BaseModel

from shared.llm.cache import CachedResponse, LLMCache, cache_key, scoped_key, split_chunks
from shared.llm.client import LLMClient, TokenBudget, Usage
from tests.integration.llm.conftest import FAST_RETRY
from tests.support.fake_llm_server import FakeLLMServer, chat_json


class Summary(BaseModel):
    title: str
    count: int


MESSAGES = [{"role": "user", "content": "Summarise these 12 answers about onboarding."}]
ANSWER = {"title": "Onboarding is slow", "count": 12}


def make_client(budget: TokenBudget | None = None) -> LLMClient:
    # Built from settings, as a worker process would: a fresh cache object and client each time.
    c = LLMClient.from_settings(budget=budget, retry=FAST_RETRY)
    assert c is not None and c.cache is not None
    return c


def test_second_identical_call_is_a_cache_hit(llm_cache_env: dict[str, str], fake_llm: FakeLLMServer) -> None:
    fake_llm.script(chat_json(ANSWER, prompt_tokens=200, completion_tokens=20))
    budget = TokenBudget(10_000)
    c = make_client(budget)

    first = c.complete_json(MESSAGES, Summary, purpose="summary")
    assert not first.cached and budget.used == 220

    second = c.complete_json(MESSAGES, Summary, purpose="summary")
    assert second.cached and second.value == first.value
    assert second.usage == Usage()
    assert len(fake_llm.requests) == 1  # no second HTTP call
    assert budget.used == 220  # the hit cost no budget
    assert c.usage_total == first.usage


def test_cache_hit_across_client_instances(llm_cache_env: dict[str, str], fake_llm: FakeLLMServer) -> None:
    """A retried job in a new process (new client, new budget) pays nothing for answers it already has."""
    fake_llm.script(chat_json(ANSWER))
    make_client().complete_json(MESSAGES, Summary)

    budget = TokenBudget(10_000)
    again = make_client(budget).complete_json(MESSAGES, Summary)
    assert again.cached and again.value == Summary(**ANSWER)
    assert len(fake_llm.requests) == 1
    assert budget.used == 0


def test_different_prompt_or_parameters_miss(llm_cache_env: dict[str, str], fake_llm: FakeLLMServer) -> None:
    fake_llm.script(*[chat_json(ANSWER)] * 3)
    c = make_client()
    c.complete_json(MESSAGES, Summary)
    assert not c.complete_json([{"role": "user", "content": "Something else."}], Summary).cached
    assert not c.complete_json(MESSAGES, Summary, max_tokens=801).cached
    assert len(fake_llm.requests) == 3


def test_repaired_answer_is_cached(llm_cache_env: dict[str, str], fake_llm: FakeLLMServer) -> None:
    from tests.support.fake_llm_server import chat_content

    fake_llm.script(chat_content("{oops"), chat_json(ANSWER))
    make_client().complete_json(MESSAGES, Summary)
    assert make_client().complete_json(MESSAGES, Summary).cached
    assert len(fake_llm.requests) == 2


def test_storage_down_does_not_fail_the_call(llm_env: dict[str, str], fake_llm: FakeLLMServer,
                                             caplog: pytest.LogCaptureFixture) -> None:
    from devhost.azurite import connection_string, free_port

    port = free_port()  # nothing listens there
    table = TableClient.from_connection_string(connection_string(port, port, port), "llmcache",
                                               retry_total=0, connection_timeout=1)
    cache = LLMCache(table)
    c = LLMClient.from_settings(cache=cache, retry=FAST_RETRY)
    assert c is not None
    fake_llm.script(chat_json(ANSWER), chat_json(ANSWER))
    assert c.complete_json(MESSAGES, Summary).value == Summary(**ANSWER)
    assert c.complete_json(MESSAGES, Summary).value == Summary(**ANSWER)
    assert cache.errors >= 1
    assert "llm cache get failed" in caplog.text


def test_long_content_is_chunked(azurite: str) -> None:
    table = TableClient.from_connection_string(azurite, f"llmcache{secrets.token_hex(4)}")
    cache = LLMCache(table)
    # Emoji are two UTF-16 units each: 40k of them need three 30k-unit properties.
    content = "😀" * 40_000 + "end"
    key = cache_key(provider="openai", model="m", api_version="", messages=[{"role": "user", "content": "x"}],
                    schema_name="S", json_schema={}, temperature=0.0, max_tokens=1)
    assert cache.get(key) is None  # the table does not even exist yet
    cache.put(key, CachedResponse(content, "m", 1, 2))
    hit = cache.get(key)
    assert hit == CachedResponse(content, "m", 1, 2)
    row = scoped_key(key)  # the row is the tenant-scoped hash of the key
    entity = table.get_entity(row[:2], row)
    assert entity["chunks"] == 3 and entity.get("content_2")


def test_split_chunks_respects_utf16_units() -> None:
    text = "a" * 29_999 + "😀" + "b" * 10
    chunks = split_chunks(text, 30_000)
    assert "".join(chunks) == text
    assert all(sum(2 if ord(ch) > 0xFFFF else 1 for ch in c) <= 30_000 for c in chunks)
    assert split_chunks("short") == ["short"]


def test_cache_key_is_stable_and_sensitive() -> None:
    base = dict(provider="azure", model="dep", api_version="2024-10-21", messages=[{"role": "user", "content": "x"}],
                schema_name="S", json_schema={"type": "object"}, temperature=0.0, max_tokens=800)
    k = cache_key(**base)  # type: ignore[arg-type]
    assert k == cache_key(**base)  # type: ignore[arg-type]
    assert len(k) == 64
    for change in ({"model": "other"}, {"api_version": "2025-01-01"}, {"temperature": 0.2},
                   {"json_schema": {"type": "array"}}, {"schema_name": "T"},
                   {"messages": [{"role": "user", "content": "y"}]}):
        assert cache_key(**{**base, **change}) != k  # type: ignore[arg-type]
