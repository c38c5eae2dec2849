"""Timer trigger: recover stale and lost jobs, and delete expired ones (see ``shared.runtime.reaper``)."""

from __future__ import annotations

import logging

import azure.functions as func

from shared import platform

bp = func.Blueprint()  # type: ignore[no-untyped-call]
log = logging.getLogger("thematiq.reaper")


@bp.function_name("reaper")
@bp.timer_trigger(arg_name="timer", schedule="%REAPER_SCHEDULE%", run_on_startup=False, use_monitor=True)
def reaper(timer: func.TimerRequest) -> None:
    report = platform.current().reaper().run()
    log.info("reaper%s: %s", " (past due)" if timer.past_due else "", report.summary())
