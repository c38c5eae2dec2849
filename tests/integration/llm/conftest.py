"""Fixtures for the LLM layer: a fake endpoint, settings pointing at it, fast retries."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest

from shared.sdk.retry import RetryPolicy
from tests.support.fake_llm_server import FakeLLMServer

#: Three attempts with millisecond backoff, so retry tests take no time.
FAST_RETRY = RetryPolicy(max_attempts=3, base_delay=timedelta(milliseconds=10), factor=2.0,
                         max_delay=timedelta(milliseconds=50), jitter=0.5)


@pytest.fixture
def fake_llm() -> Iterator[FakeLLMServer]:
    """A started fake OpenAI/Azure OpenAI server, stopped after the test."""
    with FakeLLMServer() as server:
        yield server


@pytest.fixture
def llm_env(fake_llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """LLM settings for an OpenAI-compatible endpoint on the fake server, caching off.

    Only the environment is set (no Storage): tests that want the cache add
    ``llm_cache_env``.
    """
    env = {
        "LLM_PROVIDER": "openai",
        "LLM_ENDPOINT": fake_llm.url + "/v1",
        "LLM_API_KEY": "sk-test-secret-key",
        "LLM_DEPLOYMENT": "gpt-4o-mini",
        "LLM_API_VERSION": "2024-10-21",
        "LLM_EMBEDDINGS_DEPLOYMENT": "",
        "LLM_TIMEOUT_SECONDS": "2",
        "LLM_MAX_TOKENS_PER_JOB": "200000",
        "LLM_CACHE_TABLE": "",
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return env


@pytest.fixture
def llm_cache_env(azurite: str, llm_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """``llm_env`` plus Storage on the session's Azurite and a fresh cache table."""
    env = {**llm_env, "AzureWebJobsStorage": azurite, "LLM_CACHE_TABLE": f"llmcache{secrets.token_hex(4)}"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    reset = _connections_reset()
    reset()
    yield env
    reset()


def _connections_reset() -> Callable[[], None]:
    # shared.storage.connections caches clients built from the environment; forget them
    # around the test (it may not exist in every checkout of this layer).
    try:
        from shared.storage.connections import reset_clients
    except ImportError:
        return lambda: None
    return reset_clients
