"""A pipeline's settings-dependent params check runs at submission: llm=required without a provider is a 422."""

from __future__ import annotations

import json

import pytest

from shared.storage.connections import get_table_client
from tests.support.direct import http


@pytest.fixture(autouse=True)
def _env(storage_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_PROVIDER", "none")


def test_llm_required_without_a_provider_is_rejected_naming_the_field() -> None:
    body = {"pipeline": "thematic", "params": {"llm": "required"}, "input": [{"id": "1", "text": "late delivery"}]}
    resp = http("submit_job", "POST", "jobs", body=body)
    assert resp.status_code == 422
    problem = json.loads(resp.get_body())
    assert [e["field"] for e in problem["errors"]] == ["params.llm"]
    assert list(get_table_client().list_entities()) == []
