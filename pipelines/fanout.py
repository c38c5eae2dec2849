"""``fanout``: a map stage over numbers. Exercises fan-out/fan-in, chunk retries and the error budget."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from shared.sdk import PermanentError, Pipeline, PipelineContext, RetryPolicy, ValidationFailed


class FanoutParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    chunk_size: int = Field(default=10, ge=1, le=10_000)
    seconds_per_item: float = Field(default=0.0, ge=0, le=10)
    #: CPU work per item (a busy loop), for measuring scale-out on real cores.
    cpu_ms_per_item: float = Field(default=0.0, ge=0, le=10_000)
    #: Chunks (by index) whose function fails on every attempt.
    fail_chunks: list[int] = Field(default_factory=list, max_length=1000)
    fail_permanently: bool = False
    error_budget: float = Field(default=0.0, ge=0, lt=1)


def validate_input(data: Any) -> list[float]:
    if not isinstance(data, list) or not all(isinstance(x, int | float) and not isinstance(x, bool) for x in data):
        raise ValidationFailed("input must be a list of numbers", [{"field": "input", "message": "a list of numbers"}])
    return [float(x) for x in data]


def square_chunk(ctx: PipelineContext, params: FanoutParams, items: list[dict[str, Any]]) -> list[float]:
    """The map function: runs in a chunk worker's pipeline process."""
    index = items[0]["chunk"] if items else -1
    if index in params.fail_chunks:
        if params.fail_permanently:
            raise PermanentError(f"chunk {index} fails on purpose")
        raise RuntimeError(f"chunk {index} fails on purpose (attempt {ctx.attempt})")
    out = []
    for n, item in enumerate(items):
        ctx.raise_if_cancelled()
        time.sleep(params.seconds_per_item)
        _burn(params.cpu_ms_per_item / 1000)
        out.append(item["x"] * item["x"])
        ctx.progress("square", n + 1, len(items))
    return out


def _burn(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def run(ctx: PipelineContext, params: FanoutParams, numbers: list[float]) -> dict[str, Any]:
    ctx.progress("split", 0, len(numbers))
    # Each item knows its chunk so the map function can fail chosen chunks on purpose.
    items = [{"x": x, "chunk": i // params.chunk_size} for i, x in enumerate(numbers)]
    result = ctx.map("square", items, square_chunk, chunk_size=params.chunk_size, error_budget=params.error_budget)
    squares = [v for v in result.flat() if v is not None]
    ctx.progress("sum", len(squares), len(squares))
    return {
        "count": len(squares),
        "sum_of_squares": sum(squares),
        "chunks": len(result.outputs),
        "skipped": result.skipped,
    }


PIPELINE = Pipeline(
    name="fanout",
    params_model=FanoutParams,
    run=run,
    validate_input=validate_input,
    # Short delays: this pipeline exists to exercise the platform in tests.
    retry=RetryPolicy(max_attempts=3, base_delay=timedelta(seconds=1), max_delay=timedelta(seconds=4)),
    timeout_seconds=600,
    description="Squares numbers in a map stage spread over chunk workers; for testing fan-out.",
)
