"""Queue trigger and timer: completion webhooks (see ``shared.runtime.callbacks`` and docs/webhooks.md)."""

from __future__ import annotations

import logging

import azure.functions as func

from shared.api import views
from shared.runtime.callbacks import CallbackSender

bp = func.Blueprint()  # type: ignore[no-untyped-call]
log = logging.getLogger("thematiq.callbacks")
API = "/api"
_sender: CallbackSender | None = None


def sender() -> CallbackSender:
    global _sender
    if _sender is None:
        # The receiver gets exactly the JSON GET /api/jobs/{id} answers.
        _sender = CallbackSender(public=lambda job: views.public(job, API))
    return _sender


@bp.function_name("callback_sender")
@bp.queue_trigger(arg_name="msg", queue_name="%CALLBACKS_QUEUE%", connection="AzureWebJobsStorage")
def callback_sender(msg: func.QueueMessage) -> None:
    outcome = sender().handle(msg.get_body().decode("utf-8", "replace"))
    log.info("callback message %s (delivery %s): %s", msg.id, msg.dequeue_count, outcome)


@bp.function_name("callback_sweep")
@bp.timer_trigger(arg_name="timer", schedule="0 */5 * * * *", run_on_startup=False, use_monitor=True)
def callback_sweep(timer: func.TimerRequest) -> None:
    sent = sender().sweep()
    if sent:
        log.info("callback sweep: %d lost deliveries enqueued again", sent)
