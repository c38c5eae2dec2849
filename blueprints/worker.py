"""Queue trigger: one delivery of a job message runs one attempt (see ``shared.runtime.worker``)."""

from __future__ import annotations

import logging
import sys

import azure.functions as func

from shared import platform

bp = func.Blueprint()  # type: ignore[no-untyped-call]
log = logging.getLogger("thematiq.worker")

# Inside a Functions worker process (Microsoft's runtime is indexing this app), start the attempt zygote now, while
# the runtime indexes and loads the other functions: started at the first job instead, that job waits for the
# zygote's imports (4-8 s on 2 busy cores; bench/platform.py --sections first). Not when a test or a tool imports
# the app in its own process: nothing there wants a zygote behind it.
if "azure_functions_runtime" in sys.modules or "azure_functions_worker" in sys.modules:
    platform.current().warm_attempts()


@bp.function_name("job_worker")
@bp.queue_trigger(arg_name="msg", queue_name="%JOBS_QUEUE%", connection="AzureWebJobsStorage")
def job_worker(msg: func.QueueMessage) -> None:
    outcome = platform.current().worker.handle(msg.get_body().decode("utf-8", "replace"), msg.dequeue_count or 1)
    log.info("message %s (delivery %s): %s", msg.id, msg.dequeue_count, outcome)
