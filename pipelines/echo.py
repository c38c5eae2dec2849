"""``echo``: returns its input. The cheapest possible job, used to measure the platform itself."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from shared.sdk import Pipeline, PipelineContext, RetryPolicy


class EchoParams(BaseModel):
    model_config = ConfigDict(extra="forbid")


def run(ctx: PipelineContext, params: EchoParams, data: Any) -> Any:
    ctx.progress("echo", 1, 1)
    return {"echo": data}


PIPELINE = Pipeline(
    name="echo",
    params_model=EchoParams,
    run=run,
    retry=RetryPolicy(max_attempts=3),
    timeout_seconds=60,
    description="Returns its input unchanged.",
)
