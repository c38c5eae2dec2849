"""Queue trigger: one delivery of a job message runs one attempt (see ``shared.runtime.worker``)."""

from __future__ import annotations

import logging

import azure.functions as func

from shared import platform

bp = func.Blueprint()  # type: ignore[no-untyped-call]
log = logging.getLogger("thematiq.worker")

# The attempt zygote starts at this instance's first queue invocation (``Platform.warm_attempts``, when the worker
# is first built), not at import: an instance that serves only HTTP never keeps one. An attempt that arrives while
# it is still starting runs in a fresh interpreter instead of waiting (bench/platform.py --sections first).


@bp.function_name("job_worker")
@bp.queue_trigger(arg_name="msg", queue_name="%JOBS_QUEUE%", connection="AzureWebJobsStorage")
def job_worker(msg: func.QueueMessage) -> None:
    outcome = platform.current().worker.handle(msg.get_body().decode("utf-8", "replace"), msg.dequeue_count or 1)
    log.info("message %s (delivery %s): %s", msg.id, msg.dequeue_count, outcome)
