"""Map stages: fan one job's work out over many queue messages, and fan back in exactly once.

A pipeline calls ``ctx.map(stage, items, fn)``; this module plans the chunks, and
``shared.core.lifecycle`` owns every chunk and fan-in transition. The first time, the items are
split into chunks, one chunk entity each in the job's own partition (written in
entity-group transactions of 100), and the attempt *suspends*: the pipeline
process exits, the job becomes ``waiting`` and no worker is held. Chunk
messages go on ``CHUNKS_QUEUE``, where any number of instances pick them up
(``shared.runtime.chunk_worker``). When the last chunk finishes, exactly one party
enqueues a resume message; the job's attempt runs again from the top, its
earlier stages come back from their checkpoints, and ``ctx.map`` now returns
the chunks' outputs.

**Fan-in is race-free** by two rules, both plain Table Storage semantics:

1. *Write, then look.* Every chunk writes its own terminal state first and only
   then lists the stage's chunks (one range query in one partition). Storage is
   strongly consistent, so of any two chunks finishing "at the same
   millisecond", the one whose query runs second sees both finished: at least
   one finisher always sees the stage complete. The parent does the same after
   it becomes ``waiting``, so chunks that finished before it did are not missed.
2. *One conditional write decides.* Everyone who sees the stage complete tries
   to set ``fan_in_at`` on the job row with its ETag, and only while the job is
   ``waiting`` for this stage with no ``fan_in_at`` yet. Exactly one write
   wins; only the winner sends the resume message. A duplicate delivery of a
   finished chunk is a no-op before it gets this far.

A crash between the winning write and the send is repaired by the reaper,
which re-sends the resume of a job that has waited too long since its fan-in.

**Fairness.** At most ``MAX_CHUNKS_IN_FLIGHT_PER_JOB`` chunks of a job are
queued or running; the rest are ``pending``, and each finished chunk releases
the next. Jobs therefore interleave on the shared queue instead of one large
job filling it. (Two completions racing can overshoot the window by one each;
the cap is a fairness bound, not a hard limit.)
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import math
from collections.abc import Callable, Sequence
from typing import Any

from shared.config.constants import INLINE_INPUT_MAX_BYTES, STAGE_RE
from shared.config.settings import get_settings
from shared.core.chunks import Chunk, ChunkStatus
from shared.core.errors import PermanentError
from shared.core.lifecycle import Lifecycle
from shared.core.names import chunk_blob_name
from shared.core.ports import Blobs
from shared.sdk.fanout_types import MapResult, Suspend

log = logging.getLogger(__name__)

#: A stage is split into at most this many chunks, whatever the chunk size asked for.
MAX_CHUNKS = 2000


def chunk_size_for(n_items: int, requested: int | None, window: int) -> int:
    """The pipeline's chunk size, or enough chunks to keep a full window busy a few times over.

    Either way at most :data:`MAX_CHUNKS` chunks.
    """
    size = requested or max(1, math.ceil(n_items / (4 * window)))
    return max(size, math.ceil(n_items / MAX_CHUNKS), 1)


def function_ref(fn: Callable[..., Any]) -> str:
    ref = f"{fn.__module__}:{fn.__qualname__}"
    if "<" in ref:
        raise TypeError("a map function must be a module-level function (the chunk worker imports it)")
    return ref


def _plan(items: Sequence[Any], size: int, ref: str) -> str:
    return hashlib.sha256(f"{len(items)}:{size}:{ref}".encode()).hexdigest()[:16]


# -- in the pipeline process ----------------------------------------------------------
def map_stage(
    *,
    tenant: str,
    job_id: str,
    stage: str,
    items: Sequence[Any],
    fn: Callable[..., Any],
    chunk_size: int | None,
    error_budget: float,
    max_attempts: int,
    lifecycle: Lifecycle,
) -> MapResult:
    """``ctx.map``: collect the outputs if the stage is done, otherwise create its chunks and suspend."""
    if not STAGE_RE.match(stage):
        raise PermanentError(f"invalid map stage name {stage!r}")
    if not 0 <= error_budget < 1:
        raise PermanentError("error_budget must be within [0, 1)")
    settings = get_settings()
    ref = function_ref(fn)
    size = chunk_size_for(len(items), chunk_size, settings.max_chunks_in_flight_per_job)
    plan = _plan(items, size, ref)
    stores = lifecycle.stores
    existing = {c.index: c for c in stores.chunks.list_stage(tenant, job_id, stage)}
    n_chunks = math.ceil(len(items) / size) if items else 0
    if existing and any(c.plan != plan for c in existing.values()):
        raise PermanentError(f"map stage {stage!r} was started with a different input or chunk size")
    if n_chunks and len(existing) == n_chunks and all(c.status.terminal for c in existing.values()):
        return _collect(stores.blobs, stage, [existing[i] for i in range(n_chunks)], error_budget)
    if not n_chunks:
        return MapResult([], [])
    missing = [i for i in range(n_chunks) if i not in existing]
    if missing:
        new: list[Chunk] = []
        for i in missing:
            part = list(items[i * size : (i + 1) * size])
            data = gzip.compress(json.dumps(part, separators=(",", ":"), ensure_ascii=False).encode(), 6)
            inline = len(data) <= INLINE_INPUT_MAX_BYTES
            name = None if inline else chunk_blob_name(tenant, job_id, stage, i, "in.json.gz")
            if name:
                stores.blobs.put(name, data, "application/gzip")
            new.append(
                Chunk(
                    tenant=tenant,
                    job_id=job_id,
                    stage=stage,
                    index=i,
                    status=ChunkStatus.PENDING,
                    items=len(part),
                    fn_ref=ref,
                    of=n_chunks,
                    plan=plan,
                    budget=error_budget,
                    max_attempts=max_attempts,
                    input_inline=data if inline else None,
                    input_blob=name,
                )
            )
        lifecycle.create_chunks(tenant, job_id, stage, new)
    raise Suspend(stage, n_chunks)


def _collect(blobs: Blobs, stage: str, chunks: list[Chunk], budget: float) -> MapResult:
    outputs: list[Any] = []
    skipped: list[dict[str, Any]] = []
    total = sum(c.items for c in chunks)
    for c in chunks:
        if c.status == ChunkStatus.SUCCEEDED and c.output_blob:
            data = blobs.get(c.output_blob)
            outputs.append(data if c.output_blob.endswith(".bin") else json.loads(data))
        else:
            outputs.append(None)
            skipped.append(
                {
                    "stage": stage,
                    "chunk": c.index,
                    "items": c.items,
                    "status": c.status.value,
                    "error": {"type": c.error_type, "message": c.error_message},
                }
            )
    failed = sum(s["items"] for s in skipped)
    if failed and failed > budget * total:
        raise PermanentError(f"map stage {stage!r}: {failed} of {total} items failed, over the error budget")
    return MapResult(outputs, [c.items for c in chunks], skipped)
