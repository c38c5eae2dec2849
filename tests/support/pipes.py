"""Pipelines that tests register explicitly (``Registry.register("tests.support.pipes:…")``)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from shared.sdk.pipeline import Pipeline, PipelineContext


class NoParams(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _budget(ctx: PipelineContext, params: NoParams, data: Any) -> dict[str, int]:
    from shared.llm.client import TokenBudget

    budget = TokenBudget.from_settings()
    return {"used": budget.used, "limit": budget.limit}


BUDGET = Pipeline(name="budget", params_model=NoParams, run=_budget, description="Reports its LLM token budget.")
