"""A fan-out job runs end to end on ``Platform.in_memory()``: no Azurite, no processes, no sockets.

The app's own functions (``function_app.py``, the blueprints) take their services from the installed platform,
so this drives the whole path a deployment takes: the HTTP submit, the job worker (checkpoint, then ``ctx.map()``
writes the chunks and the attempt suspends), the chunk worker for each chunk (the last one fans in and sends the
resume), the job worker again (the checkpoint restored, the map's outputs read), and the result download.
"""

from __future__ import annotations

import json

import pytest

from shared.config.settings import get_settings
from shared.core.chunks import ChunkStatus
from shared.core.jobs import Status
from shared.core.names import checkpoint_blob_name
from shared.core.registry import Registry
from shared.platform import Platform

from .delivery import deliver_all, deliver_one, http

REF = "tests.unit.platform.pipes:PIPELINE"


def test_a_checkpointed_map_stage_fans_out_and_in_on_the_in_memory_platform(platform: Platform) -> None:
    platform.registry.register(REF)
    numbers = list(range(1, 11))
    submitted = http("submit_job", "POST", "jobs", {"pipeline": "staged", "params": {"chunk_size": 4},
                                                     "input": numbers})
    assert submitted.status_code == 202, submitted.get_body()
    job_id = json.loads(submitted.get_body())["id"]

    delivered = deliver_all(platform)

    # The first attempt suspended, three chunks ran, and the resume finished the job: in that order.
    assert delivered == ["job_worker", "chunk_worker", "chunk_worker", "chunk_worker", "job_worker"]
    job = platform.stores.jobs.get("local", job_id)
    assert job.status == Status.SUCCEEDED, job.error
    assert job.attempts == 1 and job.fan_ins == 1
    chunks = platform.stores.chunks.list_stage("local", job_id, "cube")
    assert [(c.index, c.status, c.attempts) for c in chunks] == [(i, ChunkStatus.SUCCEEDED, 1) for i in range(3)]
    assert platform.stores.blobs.get(checkpoint_blob_name("local", job_id, "doubled")) == json.dumps(
        [2 * n for n in numbers]).encode()
    result = http("get_job_result", "GET", f"jobs/{job_id}/result", id=job_id)
    assert result.status_code == 200
    # The resumed attempt read the checkpoint (restored) and the three chunks' outputs (the fan-in).
    assert json.loads(result.get_body()) == {"sum_of_cubes": sum((2 * n) ** 3 for n in numbers), "chunks": 3,
                                             "restored": True}


def test_the_installed_platform_serves_the_app_and_its_clock_is_the_process_clock(platform: Platform) -> None:
    from shared import platform as composition
    from shared.core.jobs import utcnow

    assert composition.current() is platform
    assert platform.fake is not None
    platform.fake.clock.advance(7200)  # the reaper's staleness and the fake's visibility move together
    assert abs((utcnow() - platform.fake.clock.now()).total_seconds()) < 1
    assert platform.service.list("local", {})[0] == []  # a fresh account: no other test's jobs


def test_chunks_a_host_cannot_run_end_the_stage_without_the_reaper(
    platform: Platform, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A pipeline disabled (DISABLED_PIPELINES) or gone from the chunk worker's host while its map stage runs: each
    # chunk fails at once, and, as for any other chunk ending, the last one settles the stage (here: the job fails,
    # every item lost). It used to end the chunk and stop, leaving the job waiting for the reaper's next run.
    platform.registry.register(REF)
    submitted = http("submit_job", "POST", "jobs", {"pipeline": "staged", "params": {"chunk_size": 4},
                                                     "input": list(range(1, 11))})
    job_id = json.loads(submitted.get_body())["id"]
    assert deliver_one(platform, get_settings().jobs_queue, "job_worker")  # the first attempt suspends
    assert platform.stores.jobs.get("local", job_id).status == Status.WAITING
    monkeypatch.setattr(Registry, "get", lambda self, name: None)

    assert deliver_all(platform) == ["chunk_worker"] * 3

    chunks = platform.stores.chunks.list_stage("local", job_id, "cube")
    assert [(c.status, c.error_type) for c in chunks] == [(ChunkStatus.FAILED, "UnknownPipeline")] * 3
    job = platform.stores.jobs.get("local", job_id)
    assert job.status == Status.FAILED and job.error is not None and job.error.type == "ChunkFailed", job
