"""The thematic pipeline with an LLM, through the local host, against a local chat-completions server.

The server speaks the OpenAI protocol and answers by schema: labels for each theme, no merges. A second,
identical job is answered entirely from the LLM cache in Table Storage: the endpoint sees no new request,
which is what makes a redelivered or retried job free.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator

import pytest

from devhost.process import HostProcess
from pipelines.thematic.result import ThematicResult
from tests.e2e.conftest import Api, host_env
from tests.support.fake_llm_server import FakeLLMServer, RecordedRequest, Reply, chat_json
from tests.support.thematic_data import feedback

API_KEY = "sk-e2e-" + secrets.token_hex(8)


def _answer(request: RecordedRequest) -> Reply:
    messages = request.body["messages"]
    system, user = messages[0]["content"], messages[-1]["content"]
    if "near-duplicates" in system:
        return chat_json({"merge": []})
    keywords = json.loads(user).get("keywords", [])
    head = " ".join(keywords[:2]) or "misc"
    return chat_json({"label": f"LLM {head}", "description": f"Responses about {head}."})


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(responder=_answer) as server:
        yield server


@pytest.fixture(scope="module")
def llm_api(azurite: str, llm: FakeLLMServer) -> Iterator[tuple[Api, HostProcess]]:
    env = host_env(
        azurite, LLM_PROVIDER="openai", LLM_ENDPOINT=llm.url + "/v1", LLM_API_KEY=API_KEY,
        LLM_DEPLOYMENT="gpt-4o-mini", LLM_CACHE_TABLE=f"llmcache{secrets.token_hex(4)}",
    )
    with HostProcess(env=env) as host:
        yield Api(host.url, env["DEVHOST_FUNCTION_KEY"]), host


def test_llm_labels_and_a_second_identical_job_costs_nothing(
    llm_api: tuple[Api, HostProcess], llm: FakeLLMServer
) -> None:
    api, host = llm_api
    items, _ = feedback(per_theme=10)
    params = {"llm": "auto", "min_theme_size": 3, "seed": 7}

    first = api.wait(api.submit("thematic", params, items)["id"], timeout=180)
    assert first["status"] == "succeeded", first
    calls = len(llm.requests)
    assert calls >= 2  # a label per theme, and the merge pass
    assert all(r.headers.get("authorization") == f"Bearer {API_KEY}" for r in llm.requests)
    _, _, doc = api.call("GET", first["links"]["result"])
    ThematicResult.model_validate(doc)
    assert all(t["label"].startswith("LLM ") for t in doc["themes"]), [t["label"] for t in doc["themes"]]
    assert first["usage"].get("llm_tokens", 0) > 0

    second = api.wait(api.submit("thematic", params, items)["id"], timeout=180)
    assert second["status"] == "succeeded", second
    assert len(llm.requests) == calls, "the second job should be answered from the cache"
    _, _, doc2 = api.call("GET", second["links"]["result"])
    assert [t["label"] for t in doc2["themes"]] == [t["label"] for t in doc["themes"]]
    # The key and the prompts never reach the host's log.
    assert API_KEY not in host.logs
    assert items[0]["text"] not in host.logs
