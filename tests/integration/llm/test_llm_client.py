"""LLMClient against the fake HTTP server: protocol shapes, retries, repair, budget, embeddings."""

from __future__ import annotations

import json
import logging
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import numpy as np
import pytest
from pydantic import BaseModel

from shared.core.errors import PermanentError, RetryableError, ThematiqError
from shared.llm.client import (
    LLMBadOutput,
    LLMBudgetExhausted,
    LLMClient,
    LLMError,
    LLMRequestRejected,
    TokenBudget,
    Usage,
    parse_retry_after,
    price,
)
from tests.integration.llm.conftest import FAST_RETRY
from tests.support.fake_llm_server import (
    FakeLLMServer,
    chat_content,
    chat_json,
    embeddings,
    error,
    hang,
    rate_limited,
    server_error,
)


class Theme(BaseModel):
    label: str
    keywords: list[str]


MESSAGES = [{"role": "user", "content": "Name the theme of: the delivery was late again."}]
GOOD = {"label": "Delivery delays", "keywords": ["late", "delivery"]}


def client(budget: TokenBudget | None = None) -> LLMClient:
    c = LLMClient.from_settings(budget=budget, retry=FAST_RETRY)
    assert c is not None
    return c


def test_openai_success_with_bearer_and_json_mode(llm_env: dict[str, str], fake_llm: FakeLLMServer) -> None:
    fake_llm.script(chat_json(GOOD, prompt_tokens=120, completion_tokens=30))
    c = client()
    result = c.complete_json(MESSAGES, Theme, max_tokens=200, purpose="label")

    assert result.value == Theme(**GOOD)
    assert not result.cached
    assert result.usage.prompt_tokens == 120 and result.usage.completion_tokens == 30
    # gpt-4o-mini: 0.15 / 0.60 USD per 1M tokens.
    assert result.usage.cost_usd == pytest.approx((120 * 0.15 + 30 * 0.60) / 1e6)
    assert c.usage_total == result.usage
    assert c.model_name == "gpt-4o-mini"

    (req,) = fake_llm.requests
    assert req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == "Bearer sk-test-secret-key"
    assert "api-key" not in req.headers
    assert req.body["model"] == "gpt-4o-mini"
    assert req.body["response_format"] == {"type": "json_object"}
    assert req.body["max_tokens"] == 200 and req.body["temperature"] == 0.0
    system, user = req.body["messages"]
    assert system["role"] == "system" and '"keywords"' in system["content"] and "JSON" in system["content"]
    assert user == MESSAGES[0]


def test_existing_system_message_gets_the_schema(llm_env: dict[str, str], fake_llm: FakeLLMServer) -> None:
    fake_llm.script(chat_json(GOOD))
    msgs = [{"role": "system", "content": "You label survey answers."}, *MESSAGES]
    client().complete_json(msgs, Theme)
    sent = fake_llm.requests[0].body["messages"]
    assert len(sent) == 2
    assert sent[0]["content"].startswith("You label survey answers.") and "JSON schema" in sent[0]["content"]


def test_azure_api_key_and_url_shape(llm_env: dict[str, str], fake_llm: FakeLLMServer,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_PROVIDER", "azure")
    monkeypatch.setenv("LLM_ENDPOINT", fake_llm.url + "/")
    monkeypatch.setenv("LLM_DEPLOYMENT", "chat-dep")
    monkeypatch.setenv("LLM_API_KEY", "azure-key")
    fake_llm.script(chat_json(GOOD))
    assert client().complete_json(MESSAGES, Theme).value.label == "Delivery delays"

    (req,) = fake_llm.requests
    assert req.path == "/openai/deployments/chat-dep/chat/completions"
    assert req.query == {"api-version": ["2024-10-21"]}
    assert req.headers["api-key"] == "azure-key"
    assert "authorization" not in req.headers
    # The official SDK sends the deployment as `model` too (Azure routes by the path and ignores it).
    assert req.body["model"] == "chat-dep"


class FakeToken:
    def __init__(self, token: str, expires_on: int) -> None:
        self.token = token
        self.expires_on = expires_on


class FakeCredential:
    """Stands in for azure-identity (no network): counts token requests."""

    def __init__(self) -> None:
        self.scopes: list[str] = []

    def get_token(self, *scopes: str, **kwargs: Any) -> FakeToken:
        self.scopes.extend(scopes)
        return FakeToken(f"entra-token-{len(self.scopes)}", int(time.time()) + 3600)


def test_azure_entra_token_is_cached(fake_llm: FakeLLMServer) -> None:
    cred = FakeCredential()
    c = LLMClient(provider="azure", endpoint=fake_llm.url, deployment="dep", credential=cred,  # type: ignore[arg-type]
                  retry=FAST_RETRY)
    fake_llm.script(chat_json(GOOD), chat_json(GOOD))
    c.complete_json(MESSAGES, Theme)
    c.complete_json([{"role": "user", "content": "another"}], Theme)
    assert cred.scopes == ["https://cognitiveservices.azure.com/.default"]
    assert [r.headers["authorization"] for r in fake_llm.requests] == ["Bearer entra-token-1"] * 2


def test_a_rate_limited_call_waits_the_retry_after_seconds_before_retrying(llm_env: dict[str, str], fake_llm: FakeLLMServer) -> None:
    """A 429 with ``Retry-After: 1``: the retry comes at least a second later."""
    fake_llm.script(rate_limited(retry_after="1"), chat_json(GOOD))
    result = client().complete_json(MESSAGES, Theme)
    assert result.value.label == "Delivery delays"
    first, second = fake_llm.requests
    assert second.at - first.at >= 1.0


def test_retry_after_ms_wins_over_retry_after(llm_env: dict[str, str], fake_llm: FakeLLMServer) -> None:
    """A 429 with both headers (Azure OpenAI sends both): the retry waits ``retry-after-ms``."""
    # retry-after-ms wins over Retry-After (Azure OpenAI sends both).
    fake_llm.script(rate_limited(retry_after="5", retry_after_ms="300"), chat_json(GOOD))
    client().complete_json(MESSAGES, Theme)
    first, second = fake_llm.requests
    # The lower bound is the behaviour; the upper one only says the 5 s Retry-After was not used (the client's
    # jitter adds up to 10 %), so a loaded machine that is slow to send the retry does not fail it.
    assert 0.3 <= second.at - first.at < 5.0


def test_retry_after_too_long_fails_at_once(llm_env: dict[str, str], fake_llm: FakeLLMServer) -> None:
    fake_llm.script(rate_limited(retry_after="3600"))
    with pytest.raises(LLMError) as info:
        client().complete_json(MESSAGES, Theme)
    assert info.value.retry_after == 3600
    assert len(fake_llm.requests) == 1


def test_parse_retry_after_forms() -> None:
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after({"retry-after": "2"}) == 2.0
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    date = format_datetime(now + timedelta(seconds=30), usegmt=True)
    assert parse_retry_after({"retry-after": date}, now=now) == pytest.approx(30)
    assert parse_retry_after({"retry-after": format_datetime(now - timedelta(seconds=5), usegmt=True)}, now=now) == 0
    assert parse_retry_after({}) is None
    assert parse_retry_after({"retry-after": "soon"}) is None


def test_server_errors_are_retried_until_the_call_succeeds(llm_env: dict[str, str], fake_llm: FakeLLMServer) -> None:
    """500 then 503 then 200: three requests, one answer."""
    fake_llm.script(server_error(500), server_error(503), chat_json(GOOD))
    assert client().complete_json(MESSAGES, Theme).value == Theme(**GOOD)
    assert len(fake_llm.requests) == 3


def test_server_errors_that_never_end_raise_a_retryable_error_and_charge_nothing(llm_env: dict[str, str], fake_llm: FakeLLMServer) -> None:
    """Every request answered 500: a retryable LLMError after ``max_attempts``, the token budget untouched."""
    fake_llm.script(*[server_error()] * 10)
    budget = TokenBudget(10_000)
    with pytest.raises(LLMError) as info:
        client(budget).complete_json(MESSAGES, Theme)
    assert isinstance(info.value, RetryableError) and info.value.retryable
    assert len(fake_llm.requests) == FAST_RETRY.max_attempts
    # A failed call charges nothing and releases its reservation.
    assert budget.used == 0 and budget.remaining == 10_000


def test_4xx_is_rejected_without_retry(llm_env: dict[str, str], fake_llm: FakeLLMServer) -> None:
    fake_llm.script(error(401, "invalid_api_key"))
    with pytest.raises(LLMRequestRejected) as info:
        client().complete_json(MESSAGES, Theme)
    assert isinstance(info.value, PermanentError)
    assert "401" in str(info.value) and "sk-test" not in str(info.value)
    assert len(fake_llm.requests) == 1


def test_timeout_is_retried_then_llm_error(llm_env: dict[str, str], fake_llm: FakeLLMServer,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_TIMEOUT_SECONDS", "0.3")
    fake_llm.script(*[hang(3)] * FAST_RETRY.max_attempts)
    with pytest.raises(LLMError):
        client().complete_json(MESSAGES, Theme)
    gave_up = time.monotonic()
    assert len(fake_llm.requests) == FAST_RETRY.max_attempts
    # Each try gave up at its 0.3 s timeout, before its 3 s hang ended: every try is measured against the hang,
    # not the three together against a 2.5 s stopwatch a loaded machine overruns.
    ends = [r.at for r in fake_llm.requests[1:]] + [gave_up]
    tries = [end - r.at for r, end in zip(fake_llm.requests, ends, strict=True)]
    assert all(t < 3.0 for t in tries), f"a try waited out the hang: {tries}"


def test_timeout_then_success(llm_env: dict[str, str], fake_llm: FakeLLMServer,
                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_TIMEOUT_SECONDS", "0.3")
    fake_llm.script(hang(3), chat_json(GOOD))
    assert client().complete_json(MESSAGES, Theme).value == Theme(**GOOD)


def test_connection_refused_is_llm_error(llm_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    from devhost.azurite import free_port

    monkeypatch.setenv("LLM_ENDPOINT", f"http://127.0.0.1:{free_port()}/v1")
    with pytest.raises(LLMError):
        client().complete_json(MESSAGES, Theme)


def test_malformed_json_gets_one_repair(llm_env: dict[str, str], fake_llm: FakeLLMServer) -> None:
    fake_llm.script(chat_content('{"label": "Delivery', prompt_tokens=100, completion_tokens=5),
                    chat_json(GOOD, prompt_tokens=140, completion_tokens=20))
    result = client().complete_json(MESSAGES, Theme)
    assert result.value == Theme(**GOOD)
    assert result.usage == Usage(240, 25, pytest.approx((240 * 0.15 + 25 * 0.60) / 1e6))  # type: ignore[arg-type]
    repair = fake_llm.requests[1].body["messages"]
    assert repair[-2] == {"role": "assistant", "content": '{"label": "Delivery'}
    assert repair[-1]["role"] == "user" and "not valid" in repair[-1]["content"]


def test_schema_violation_gets_one_repair(llm_env: dict[str, str], fake_llm: FakeLLMServer) -> None:
    fake_llm.script(chat_json({"label": "x"}), chat_json(GOOD))
    assert client().complete_json(MESSAGES, Theme).value == Theme(**GOOD)
    assert "keywords" in fake_llm.requests[1].body["messages"][-1]["content"]


def test_fenced_json_is_accepted(llm_env: dict[str, str], fake_llm: FakeLLMServer) -> None:
    fake_llm.script(chat_content("```json\n" + json.dumps(GOOD) + "\n```"))
    assert client().complete_json(MESSAGES, Theme).value == Theme(**GOOD)
    assert len(fake_llm.requests) == 1


def test_malformed_twice_is_bad_output(llm_env: dict[str, str], fake_llm: FakeLLMServer) -> None:
    fake_llm.script(chat_content("not json"), chat_content("still not json"), chat_json(GOOD))
    with pytest.raises(LLMBadOutput) as info:
        client().complete_json(MESSAGES, Theme)
    assert isinstance(info.value, PermanentError) and not info.value.retryable
    assert len(fake_llm.requests) == 2
    assert fake_llm.pending == 1


def test_content_filter_is_bad_output(llm_env: dict[str, str], fake_llm: FakeLLMServer) -> None:
    fake_llm.script(chat_content("", finish_reason="content_filter"))
    with pytest.raises(LLMBadOutput):
        client().complete_json(MESSAGES, Theme)
    assert len(fake_llm.requests) == 1


def test_budget_refuses_before_sending(llm_env: dict[str, str], fake_llm: FakeLLMServer) -> None:
    budget = TokenBudget(500)
    with pytest.raises(LLMBudgetExhausted) as info:
        client(budget).complete_json(MESSAGES, Theme, max_tokens=800)
    assert isinstance(info.value, ThematiqError) and not isinstance(info.value, RetryableError | PermanentError)
    assert fake_llm.requests == []
    assert budget.used == 0


def test_budget_accounts_actual_usage_then_stops(llm_env: dict[str, str], fake_llm: FakeLLMServer) -> None:
    budget = TokenBudget(1_000)
    fake_llm.script(chat_json(GOOD, prompt_tokens=300, completion_tokens=100), chat_json(GOOD))
    c = client(budget)
    c.complete_json(MESSAGES, Theme, max_tokens=300)
    assert budget.used == 400  # the real usage, not the estimate
    # ~100 prompt tokens (schema included) + 300 max_tokens would still fit; 600 would not.
    with pytest.raises(LLMBudgetExhausted):
        c.complete_json(MESSAGES, Theme, max_tokens=600)
    assert len(fake_llm.requests) == 1
    assert budget.used == 400


def test_budget_from_settings(llm_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_MAX_TOKENS_PER_JOB", "1234")
    c = LLMClient.from_settings()
    assert c is not None and c.budget is not None and c.budget.limit == 1234


def test_from_settings_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_PROVIDER", "none")
    monkeypatch.setenv("LLM_ENDPOINT", "http://127.0.0.1:9/v1")
    assert LLMClient.from_settings() is None
    monkeypatch.setenv("LLM_PROVIDER", "openai")
    monkeypatch.setenv("LLM_ENDPOINT", "")
    assert LLMClient.from_settings() is None
    monkeypatch.setenv("LLM_PROVIDER", "bogus")
    monkeypatch.setenv("LLM_ENDPOINT", "http://127.0.0.1:9/v1")
    with pytest.raises(ValueError):
        LLMClient.from_settings()


def test_embeddings_openai(llm_env: dict[str, str], fake_llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_EMBEDDINGS_DEPLOYMENT", "text-embedding-3-small")
    fake_llm.script(embeddings([[3.0, 4.0, 0.0], [0.0, 0.0, 2.0]], prompt_tokens=8))
    budget = TokenBudget(10_000)
    c = client(budget)
    vecs = c.embed(["first", ""])
    assert vecs.dtype == np.float32 and vecs.shape == (2, 3)
    np.testing.assert_allclose(vecs, [[0.6, 0.8, 0.0], [0.0, 0.0, 1.0]], rtol=1e-6)
    (req,) = fake_llm.requests
    assert req.path == "/v1/embeddings"
    assert req.body == {"input": ["first", " "], "model": "text-embedding-3-small", "encoding_format": "float"}
    assert budget.used == 8 and c.usage_total.prompt_tokens == 8


def test_embeddings_azure_url(fake_llm: FakeLLMServer) -> None:
    c = LLMClient(provider="azure", endpoint=fake_llm.url, deployment="chat", api_key="k",
                  embeddings_deployment="emb", api_version="2024-10-21", retry=FAST_RETRY)
    fake_llm.script(embeddings([[1.0, 1.0]]))
    assert c.embed(["x"]).shape == (1, 2)
    (req,) = fake_llm.requests
    assert req.path == "/openai/deployments/emb/embeddings" and req.query["api-version"] == ["2024-10-21"]
    assert req.body["model"] == "emb"


def test_embed_without_deployment_raises(llm_env: dict[str, str], fake_llm: FakeLLMServer) -> None:
    c = client()
    assert not c.embeddings_enabled
    with pytest.raises(LLMError):
        c.embed(["x"])
    assert fake_llm.requests == []


def test_price_table() -> None:
    assert price("gpt-4o-2024-08-06", 1_000_000, 0) == pytest.approx(2.50)
    assert price("gpt-4o-mini-2024-07-18", 0, 1_000_000) == pytest.approx(0.60)
    assert price("some-local-model", 1000, 1000) == 0.0


def test_logs_never_contain_prompt_response_or_key(llm_env: dict[str, str], fake_llm: FakeLLMServer,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    secret_prompt = [{"role": "user", "content": "PROMPT-SECRET-1234"}]
    fake_llm.script(server_error(), chat_content("RESPONSE-SECRET-bad"), chat_json({"label": "RESPONSE-SECRET",
                                                                                    "keywords": []}))
    with caplog.at_level(logging.DEBUG):
        client().complete_json(secret_prompt, Theme, purpose="label")
    text = caplog.text
    assert "llm chat" in text and "purpose=label" in text
    for secret in ("PROMPT-SECRET", "RESPONSE-SECRET", "sk-test-secret-key"):
        assert secret not in text


@pytest.mark.parametrize("deployment", ["o3-mini", "o4-mini-2025-04-16", "gpt-5-mini"])
def test_reasoning_models_get_max_completion_tokens_and_no_temperature(fake_llm: FakeLLMServer,
                                                                        deployment: str) -> None:
    c = LLMClient(provider="openai", endpoint=fake_llm.url + "/v1", deployment=deployment, api_key="k",
                  retry=FAST_RETRY)
    fake_llm.script(chat_json(GOOD))
    assert c.complete_json(MESSAGES, Theme, max_tokens=300).value.label == "Delivery delays"
    (req,) = fake_llm.requests
    assert req.body["max_completion_tokens"] == 300
    assert "max_tokens" not in req.body and "temperature" not in req.body


def test_a_deployment_that_rejects_max_tokens_is_switched_once(fake_llm: FakeLLMServer) -> None:
    # Azure deployments have arbitrary names: an o-series one answers 400 unsupported_parameter to max_tokens.
    c = LLMClient(provider="azure", endpoint=fake_llm.url, deployment="reasoner", api_key="k", retry=FAST_RETRY)
    fake_llm.script(error(400, "unsupported_parameter"), chat_json(GOOD), chat_json(GOOD))
    assert c.complete_json(MESSAGES, Theme, max_tokens=300).value.label == "Delivery delays"
    first, second = fake_llm.requests
    assert "max_tokens" in first.body and second.body["max_completion_tokens"] == 300
    assert "temperature" not in second.body and c.reasoning
    c.complete_json([{"role": "user", "content": "again"}], Theme)
    assert "max_completion_tokens" in fake_llm.requests[2].body  # remembered


def test_the_sdk_is_imported_lazily() -> None:
    import subprocess
    import sys

    code = "import sys, shared.llm.client; print('openai' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
