"""The in-memory platform's attempt runner: an attempt in the caller's thread, on the platform's own stores.

Production runs each attempt in a process of its own (``shared.runtime.runner``); a test on the fake has no
storage account for such a process to reach. This runner keeps the same contract (the lease renewed before and
after, the same :class:`shared.runtime.child.ChildContext`, the same :func:`shared.runtime.child.run_attempt`, the
same outcome kinds) but hands the context the platform's stores, so checkpoints, ``ctx.map()`` and the fan-in
behind it run against the fake. What it does not give: isolation (a crash is the test's), the timeout, the
self-fencing, and concurrent attempts (the LLM allowance and cache scope are process-wide while one runs).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from shared.config.settings import Settings
from shared.core.errors import LostClaim
from shared.core.jobs import JobError, Progress
from shared.core.ports import Stores
from shared.runtime import protocol
from shared.runtime.child import ChildContext, run_attempt
from shared.runtime.protocol import AttemptSpec
from shared.runtime.runner import AttemptResult, Lease, Runner, RunnerFactory


class _Collected:
    """The events an attempt emitted, kept instead of piped: what the runner folds into the outcome."""

    def __init__(self) -> None:
        self.usage: dict[str, float] = {}
        self.progress: Progress | None = None

    def emit(self, event: BaseModel) -> None:
        if isinstance(event, protocol.UsageEvent):
            for name, value in event.counters.items():
                self.usage[name] = self.usage.get(name, 0.0) + float(value)
        elif isinstance(event, protocol.ProgressEvent):
            self.progress = Progress(stage=event.stage, processed=event.processed, total=event.total,
                                     message=event.message)


class InProcessRunner:
    """One attempt of a job or a chunk, run by :func:`shared.runtime.child.run_attempt` in this thread."""

    def __init__(self, stores: Stores, lease: Lease, spec: AttemptSpec) -> None:
        self.stores, self.lease, self.spec = stores, lease, spec

    def run(self, input_value: Any) -> AttemptResult:
        from shared.llm import reset_job_scope, scope_to_job

        try:
            cancel = self.lease.renew(None)
        except LostClaim:
            return AttemptResult("lost")
        events = _Collected()
        with tempfile.TemporaryDirectory(prefix="thematiq-attempt-") as tmp:
            input_path, result_path = Path(tmp) / "input.json", Path(tmp) / "result.json"
            input_path.write_text(json.dumps(input_value, ensure_ascii=False), encoding="utf-8")
            spec = self.spec.model_copy(update={"input_path": str(input_path), "result_path": str(result_path)})
            ctx = ChildContext(spec, events, lambda: self.stores)
            if cancel:
                ctx.request_cancel()
            scope_to_job(spec.tenant, spec.llm_tokens_used, spec.llm_token_limit)
            try:
                terminal = run_attempt(ctx, spec)
            finally:
                reset_job_scope()
            result = result_path.read_bytes() if isinstance(terminal, protocol.Done) else None
        try:
            self.lease.renew(events.progress)
        except LostClaim:
            return AttemptResult("lost")
        out = _outcome(terminal, result)
        out.usage, out.progress = events.usage, events.progress
        return out


def _outcome(terminal: protocol.Terminal, result: bytes | None) -> AttemptResult:
    if isinstance(terminal, protocol.Done):
        return AttemptResult("succeeded", result=result, binary=terminal.binary)
    if isinstance(terminal, protocol.Suspended):
        return AttemptResult("suspended", suspended=terminal)
    if isinstance(terminal, protocol.CancelledEvent):
        return AttemptResult("cancelled")
    return AttemptResult("failed", error=JobError.of(terminal.type, terminal.message), retryable=terminal.retryable)


def in_process(stores: Stores) -> RunnerFactory:
    """The runner factory of an in-memory platform: every attempt in the caller's thread, on ``stores``."""

    def factory(lease: Lease, spec: AttemptSpec, timeout: float, settings: Settings) -> Runner:
        return InProcessRunner(stores, lease, spec)

    return factory


__all__ = ["InProcessRunner", "in_process"]
