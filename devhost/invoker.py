"""Invoke one function in the language worker over the Functions RPC protocol, and log the outcome.

Each trigger builds the function's trigger input as the host does (``TypedData`` plus trigger metadata) and calls
:func:`invoke`, which sends an ``InvocationRequest`` with a fresh invocation id and W3C trace context and waits for
the worker's ``InvocationResponse``. The worker (Microsoft's runtime) binds parameters, runs the function in its
thread pool or event loop and converts the return value and outputs; devhost writes the output bindings once the
function succeeded, as the host does. Every invocation logs one line with name, id, duration and outcome, never
payloads. A worker that dies mid-invocation fails it (the worker is restarted meanwhile).
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from devhost import outputs
from devhost.convert import RUNTIME_CAPABILITIES, WorkerCapabilities
from devhost.functions import FunctionSpec
from devhost.proto import FunctionRpc_pb2 as pb
from devhost.rpc import LanguageWorker, status_message

log = logging.getLogger("devhost")


class FunctionFailed(RuntimeError):
    """The worker answered the invocation with a failure (the function raised, or the runtime refused its value)."""


class Activity:
    """Counts work in progress so shutdown can wait for it (requests, messages, timer runs)."""

    def __init__(self) -> None:
        self._count = 0
        self._cond = threading.Condition()

    def enter(self) -> None:
        with self._cond:
            self._count += 1

    def exit(self) -> None:
        with self._cond:
            self._count -= 1
            self._cond.notify_all()

    @contextmanager
    def track(self) -> Iterator[None]:
        self.enter()
        try:
            yield
        finally:
            self.exit()

    @property
    def count(self) -> int:
        with self._cond:
            return self._count

    def wait_idle(self, timeout: float) -> bool:
        """True if everything finished within ``timeout`` seconds."""
        with self._cond:
            return self._cond.wait_for(lambda: self._count == 0, timeout=timeout)


ACTIVITY = Activity()


_WORKER: LanguageWorker | None = None
_FUNCTION_TIMEOUT: float | None = None


def use_worker(worker: LanguageWorker, function_timeout: float | None = None) -> None:
    """The worker every invocation goes to (one per devhost, as one Python worker per host by default), and
    host.json's ``functionTimeout`` in seconds (None: no limit)."""
    global _WORKER, _FUNCTION_TIMEOUT
    _WORKER = worker
    _FUNCTION_TIMEOUT = function_timeout


def capabilities() -> WorkerCapabilities:
    """What the worker declared at its last start (a restarted worker is the same program); without a worker,
    what Microsoft's runtime declares."""
    return _WORKER.capabilities if _WORKER is not None else RUNTIME_CAPABILITIES


@dataclass
class Result:
    """Outcome of one invocation. ``outputs`` maps output binding names ($return too) to values."""

    invocation_id: str
    succeeded: bool
    error: BaseException | None = None
    outputs: dict[str, pb.TypedData] = field(default_factory=dict)
    duration_ms: float = 0.0


def invoke(
    spec: FunctionSpec,
    trigger: pb.TypedData,
    reason: str,
    trigger_metadata: dict[str, pb.TypedData] | None = None,
) -> Result:
    """Run ``spec`` in the worker with ``trigger`` bound to the trigger's parameter; never raises."""
    invocation_id = str(uuid.uuid4())
    start = time.perf_counter()
    result = Result(invocation_id=invocation_id, succeeded=False)
    try:
        if _WORKER is None:
            raise RuntimeError("no language worker: call invoker.use_worker() first")
        request = pb.InvocationRequest(
            invocation_id=invocation_id,
            function_id=spec.function_id,
            input_data=[pb.ParameterBinding(name=str(spec.trigger.get("name")), data=trigger)],
            trigger_metadata=trigger_metadata or {},
            # A fresh W3C traceparent per invocation, as the host creates one per invocation.
            trace_context=pb.RpcTraceContext(trace_parent=f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"),
        )
        log.debug("Executing 'Functions.%s' (Reason='%s', Id=%s)", spec.name, reason, invocation_id)
        response = _WORKER.invoke(request, timeout=_FUNCTION_TIMEOUT, function_name=spec.name)
        if response.result.status != pb.StatusResult.Success:
            raise FunctionFailed(status_message(response.result))
        result.outputs = {b.name: b.data for b in response.output_data}
        if response.HasField("return_value"):
            result.outputs["$return"] = response.return_value
        # Outputs are sent only after the function returned, and their failure fails
        # the invocation, as the host flushes output bindings before completing it.
        outputs.flush(spec, result.outputs)
        result.succeeded = True
    except Exception as exc:  # noqa: BLE001 - the host turns any failure into a failed invocation.
        result.error = exc
        log.error("Function 'Functions.%s' (Id=%s) failed: %s", spec.name, invocation_id, exc)
    result.duration_ms = (time.perf_counter() - start) * 1000
    log_outcome(spec, result)
    return result


def log_outcome(spec: FunctionSpec, result: Result) -> None:
    """The one line per invocation, in the shape ``func start`` prints."""
    outcome = "Succeeded" if result.succeeded else "Failed"
    log.info(
        "Executed 'Functions.%s' (%s, Id=%s, Duration=%dms)",
        spec.name, outcome, result.invocation_id, round(result.duration_ms),
    )
