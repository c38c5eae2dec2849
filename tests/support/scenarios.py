"""Small steps the lifecycle scenarios share: submit, deliver, read back."""

from __future__ import annotations

import json
from typing import Any

from shared.api.service import JobService, Submitted
from shared.config.settings import get_settings
from shared.core.jobs import Job
from shared.core.registry import default_registry
from shared.runtime.chunk_worker import ChunkWorker
from shared.runtime.reaper import Reaper
from shared.runtime.worker import Worker
from tests.support.backends import Backend
from tests.support.inprocess import InProcessRunner

TENANT = "local"


def service(b: Backend) -> JobService:
    return JobService(b.stores)


def submit(b: Backend, pipeline: str = "echo", params: dict[str, Any] | None = None, input_: Any = None,
           key: str | None = None) -> Submitted:
    body = json.dumps({"pipeline": pipeline, "params": params or {}, "input": input_ if input_ is not None else [1]})
    return service(b).submit(TENANT, body.encode(), key)


def worker(b: Backend) -> Worker:
    return Worker(b.stores, default_registry(), runner=InProcessRunner)


def chunk_worker(b: Backend) -> ChunkWorker:
    return ChunkWorker(b.stores, default_registry(), runner=InProcessRunner)


def drain(b: Backend, queue: str | None = None) -> int:
    """Delete every visible message of a queue (the jobs queue by default), as the host's move of a message to
    the poison queue, or a message lost, would leave it; how many there were."""
    client = b.raw_queue(queue or get_settings().jobs_queue)
    n = 0
    for m in list(client.receive_messages(messages_per_page=32, max_messages=32, visibility_timeout=60)):
        client.delete_message(m, pop_receipt=m.pop_receipt)
        n += 1
    return n


def reaper(b: Backend) -> Reaper:
    return Reaper(b.stores, sweep=b.reaper_sweep)


def job(b: Backend, job_id: str) -> Job:
    return b.stores.jobs.get(TENANT, job_id)


def jobs(b: Backend) -> list[Job]:
    return list(b.stores.jobs.scan("PartitionKey eq @t", {"t": TENANT}))


def executions(job_id: str) -> int:
    return InProcessRunner.executions[job_id]
