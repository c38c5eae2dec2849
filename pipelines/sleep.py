"""``sleep``: waits, reports progress, and fails on request. Exercises the platform's failure paths."""

from __future__ import annotations

import os
import signal
import threading
import time
from datetime import timedelta
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from shared.sdk import PermanentError, Pipeline, PipelineContext, RetryPolicy


class Failure(StrEnum):
    NONE = "none"
    RAISE = "raise"  # a transient error on every attempt: retried, then failed
    PERMANENT = "permanent"  # a PermanentError: failed at once
    EXIT = "exit"  # the process dies hard (os._exit)
    KILL = "kill"  # the process is killed by SIGKILL, like the OOM killer
    SEGV = "segv"  # the process segfaults (SIGSEGV), like a crash in native code
    HANG = "hang"  # ignores cancellation and never finishes
    LINGER = "linger"  # succeeds, but leaves a thread running that keeps the process alive


class SleepParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    seconds: float = Field(default=1.0, ge=0, le=3600)
    steps: int = Field(default=5, ge=1, le=10_000)
    fail: Failure = Failure.NONE
    #: Fail only on attempts up to this number (0: every attempt), to test recovery.
    fail_attempts: int = Field(default=0, ge=0, le=100)
    #: Hold this many MiB (touched, so resident) while sleeping; declared in the memory estimate.
    hold_mb: int = Field(default=0, ge=0, le=4096)


def run(ctx: PipelineContext, params: SleepParams, data: Any) -> Any:
    failing = params.fail != Failure.NONE and (params.fail_attempts == 0 or ctx.attempt <= params.fail_attempts)
    if failing and params.fail == Failure.HANG:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while True:
            time.sleep(1)
    held = bytearray(params.hold_mb << 20)
    for i in range(0, len(held), 4096):
        held[i] = 1  # touch every page so the memory is really resident
    step = params.seconds / params.steps
    for i in range(params.steps):
        ctx.raise_if_cancelled()
        ctx.progress("sleep", i, params.steps, f"step {i + 1} of {params.steps}")
        time.sleep(step)
        if failing and i == params.steps // 2:
            if params.fail == Failure.RAISE:
                raise RuntimeError(f"sleep failed on purpose (attempt {ctx.attempt})")
            if params.fail == Failure.PERMANENT:
                raise PermanentError("sleep failed permanently on purpose")
            if params.fail == Failure.EXIT:
                os._exit(3)
            if params.fail == Failure.KILL:
                os.kill(os.getpid(), signal.SIGKILL)
            if params.fail == Failure.SEGV:
                os.kill(os.getpid(), signal.SIGSEGV)
    if failing and params.fail == Failure.LINGER:
        threading.Thread(target=time.sleep, args=(3600,), daemon=False).start()
    ctx.progress("sleep", params.steps, params.steps, "done")
    del held
    return {"slept_seconds": params.seconds, "steps": params.steps, "attempt": ctx.attempt}


PIPELINE = Pipeline(
    name="sleep",
    params_model=SleepParams,
    run=run,
    # Five attempts, matching host.json maxDequeueCount, with short delays so tests stay quick.
    retry=RetryPolicy(max_attempts=5, base_delay=timedelta(seconds=1), max_delay=timedelta(seconds=10)),
    timeout_seconds=3600,
    # What it holds, plus a forked attempt's own resident memory.
    memory_mb=lambda params, _input: 48.0 + params.hold_mb,
    description="Sleeps in steps, reporting progress; can fail in several ways on purpose.",
)
