"""An attempt runner that runs the pipeline in the test's own thread: the fast tier's stand-in for a child process.

It keeps what the lifecycle cares about (a heartbeat before and after the pipeline,
the outcome kinds, a lost claim) and counts executions per job, so a test can
assert that a pipeline ran exactly once.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from typing import Any, ClassVar

from shared.config.settings import Settings
from shared.core.errors import LostClaim
from shared.core.jobs import JobError
from shared.core.registry import load_ref
from shared.runtime import protocol
from shared.runtime.protocol import AttemptSpec
from shared.runtime.runner import AttemptResult, Lease
from shared.sdk.errors import Cancelled, PipelineError
from shared.sdk.fanout_types import Suspend


class _Ctx:
    def __init__(self, spec: AttemptSpec) -> None:
        self.job_id, self.tenant, self.attempt = spec.job_id, spec.tenant, spec.attempt
        self.logger = logging.getLogger("tests.inprocess")

    def progress(self, stage: str, processed: int = 0, total: int | None = None, message: str = "") -> None:
        pass

    def cancelled(self) -> bool:
        return False

    def raise_if_cancelled(self) -> None:
        pass

    def checkpoint(self, name: str, data: bytes) -> None:
        pass

    def restore(self, name: str) -> bytes | None:
        return None

    def usage(self, **counters: float) -> None:
        pass


class InProcessRunner:
    executions: ClassVar[Counter[str]] = Counter()

    def __init__(self, lease: Lease, spec: AttemptSpec, timeout: float, settings: Settings) -> None:
        self.lease, self.spec = lease, spec

    def run(self, input_value: Any) -> AttemptResult:
        try:
            self.lease.renew(None)
        except LostClaim:
            return AttemptResult("lost")
        InProcessRunner.executions[self.spec.job_id] += 1
        pipeline = load_ref(self.spec.pipeline_ref)
        try:
            result = pipeline.run(_Ctx(self.spec), pipeline.params_model.model_validate(self.spec.params), input_value)
        except Suspend as s:
            return AttemptResult("suspended", suspended=protocol.Suspended(stage=s.stage, chunks=s.chunks))
        except Cancelled:
            return AttemptResult("cancelled")
        except PipelineError as err:
            return AttemptResult("failed", error=JobError.of(type(err).__name__, str(err)), retryable=err.retryable)
        except Exception as err:
            return AttemptResult("failed", error=JobError.of(type(err).__name__, str(err)), retryable=True)
        try:
            self.lease.renew(None)
        except LostClaim:
            return AttemptResult("lost")
        return AttemptResult("succeeded", result=json.dumps(result).encode())
