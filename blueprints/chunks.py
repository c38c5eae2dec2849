"""Queue trigger: one delivery of a chunk message runs one attempt of one chunk (see ``shared.runtime.chunk_worker``)."""

from __future__ import annotations

import logging

import azure.functions as func

from shared import platform

bp = func.Blueprint()  # type: ignore[no-untyped-call]
log = logging.getLogger("thematiq.chunks")
@bp.function_name("chunk_worker")
@bp.queue_trigger(arg_name="msg", queue_name="%CHUNKS_QUEUE%", connection="AzureWebJobsStorage")
def chunk_worker(msg: func.QueueMessage) -> None:
    outcome = platform.current().chunk_worker.handle(msg.get_body().decode("utf-8", "replace"), msg.dequeue_count or 1)
    log.info("chunk message %s (delivery %s): %s", msg.id, msg.dequeue_count, outcome)
