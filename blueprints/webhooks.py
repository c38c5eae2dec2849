"""Queue trigger and timer: completion webhooks (see ``shared.runtime.webhooks`` and docs/webhooks.md)."""

from __future__ import annotations

import logging

import azure.functions as func

from shared import platform

bp = func.Blueprint()  # type: ignore[no-untyped-call]
log = logging.getLogger("thematiq.webhooks")
@bp.function_name("webhook_sender")
@bp.queue_trigger(arg_name="msg", queue_name="%CALLBACKS_QUEUE%", connection="AzureWebJobsStorage")
def webhook_sender(msg: func.QueueMessage) -> None:
    outcome = platform.current().webhook_sender.handle(msg.get_body().decode("utf-8", "replace"))
    log.info("webhook message %s (delivery %s): %s", msg.id, msg.dequeue_count, outcome)


@bp.function_name("webhook_sweep")
@bp.timer_trigger(arg_name="timer", schedule="0 */5 * * * *", run_on_startup=False, use_monitor=True)
def webhook_sweep(timer: func.TimerRequest) -> None:
    report = platform.current().webhook_sender.sweep()
    if report.resent or report.failed or report.errors:
        log.info("webhook sweep: %d lost deliveries re-sent, %d failed for good, %d errors",
                 len(report.resent), len(report.failed), report.errors)
