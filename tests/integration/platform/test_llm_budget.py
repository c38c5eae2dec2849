"""The per-job LLM token budget spans the job's processes: a later attempt starts from what earlier ones spent."""

from __future__ import annotations

import json

import pytest

from shared.core.jobs import Status
from shared.core.registry import Registry
from shared.platform import Platform
from shared.storage.blobs import BlobStore
from shared.storage.job_store import JobStore
from tests.support.direct import receive
from tests.support.platform import fast_settings, submit


@pytest.fixture(autouse=True)
def _env(storage_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    fast_settings(monkeypatch, LLM_MAX_TOKENS_PER_JOB="1000")


def test_a_retried_attempt_inherits_the_tokens_spent_before() -> None:
    registry = Registry()
    registry.register("tests.support.pipes:BUDGET")
    j = submit("echo", {}, None)  # any job row; the worker below runs it with the budget pipeline
    store = JobStore()
    row = store.get("local", j["id"])
    store.update(row, pipeline="budget", usage={"llm_tokens": 120.0})
    msg = receive()
    assert msg is not None
    assert Platform.from_settings(registry).worker.handle(msg.get_body().decode(), 1) == "succeeded"
    done = store.get("local", j["id"], with_input=True)
    assert done.status == Status.SUCCEEDED and done.result_blob
    assert json.loads(done.result_inline or BlobStore().get(done.result_blob)) == {"used": 120, "limit": 1000}


def test_allowance_caps_a_process_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    from shared.llm import client as llm

    monkeypatch.setattr(llm, "_allowance", None)
    llm.set_job_allowance(used=0, limit=250)
    budget = llm.TokenBudget.from_settings()
    assert (budget.used, budget.limit) == (0, 250)
