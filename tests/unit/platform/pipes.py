"""A pipeline that uses every part of the SDK that touches storage: a checkpoint, then a map stage."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict

from shared.sdk import Pipeline, PipelineContext


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")

    chunk_size: int = 4


def cube_chunk(ctx: PipelineContext, params: Params, items: list[int]) -> list[int]:
    """The map function: one chunk, in a chunk worker's attempt."""
    return [x**3 for x in items]


def run(ctx: PipelineContext, params: Params, numbers: list[int]) -> dict[str, Any]:
    # Stage one is checkpointed, so the resumed attempt after the fan-in must find it instead of redoing it.
    saved = ctx.restore("doubled")
    if saved is None:
        doubled = [2 * n for n in numbers]
        ctx.checkpoint("doubled", json.dumps(doubled).encode())
    else:
        doubled = json.loads(saved)
    cubes = ctx.map("cube", doubled, cube_chunk, chunk_size=params.chunk_size)
    return {"sum_of_cubes": sum(cubes.flat()), "chunks": len(cubes.outputs), "restored": saved is not None}


PIPELINE = Pipeline(name="staged", params_model=Params, run=run, description="A checkpoint, then a map stage.")
