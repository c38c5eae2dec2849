"""Call one user function the way the Python worker does, and log the outcome.

Parameters are bound by name: the trigger binding's ``name``, ``context`` and
output bindings (as ``func.Out`` objects). Sync functions run in the calling
thread (every trigger already gives each invocation its own thread, like the
worker's thread pool); ``async def`` functions run on one shared event loop in
a background thread, like the worker's loop. Every invocation logs one line
with name, id, duration and outcome, and never logs payloads.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import azure.functions as func
from azure.functions._abc import TraceContext

from devhost import outputs
from devhost.functions import FunctionSpec

log = logging.getLogger("devhost")


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


class _TraceContext(TraceContext):
    def __init__(self) -> None:
        # A fresh W3C traceparent per invocation, as the host creates one per invocation.
        self._parent = f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"

    @property
    def trace_state(self) -> str:
        return ""

    @property
    def trace_parent(self) -> str:
        return self._parent

    @property
    def attributes(self) -> dict[str, str]:
        return {}


class Context(func.Context):
    """The ``context`` parameter: invocation id, function name and directory, trace context."""

    def __init__(self, invocation_id: str, function_name: str, function_directory: str) -> None:
        self._invocation_id = invocation_id
        self._function_name = function_name
        self._function_directory = function_directory
        self._trace_context = _TraceContext()
        self._tls = threading.local()

    @property
    def invocation_id(self) -> str:
        return self._invocation_id

    @property
    def function_name(self) -> str:
        return self._function_name

    @property
    def function_directory(self) -> str:
        return self._function_directory

    @property
    def trace_context(self) -> TraceContext:
        return self._trace_context

    @property
    def retry_context(self) -> Any:
        return None

    @property
    def thread_local_storage(self) -> Any:
        # The SDK annotates this as the class threading.local; the worker returns an instance.
        return self._tls


class Out(func.Out[Any]):
    """An output binding parameter: the function calls ``set()``; the host reads it afterwards."""

    def __init__(self) -> None:
        self._value: Any = None

    def set(self, val: Any) -> None:
        self._value = val

    def get(self) -> Any:
        return self._value


@dataclass
class Result:
    """Outcome of one invocation. ``outputs`` maps output binding names ($return too) to values."""

    invocation_id: str
    succeeded: bool
    return_value: Any = None
    error: BaseException | None = None
    outputs: dict[str, Any] = field(default_factory=dict)
    duration_ms: float = 0.0


class _Loop:
    """One event loop in a daemon thread for all ``async def`` functions."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def get(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="devhost-async", daemon=True).start()
                self._loop = loop
            return self._loop


_LOOP = _Loop()


def invoke(spec: FunctionSpec, trigger_value: Any, reason: str) -> Result:
    """Run ``spec`` with ``trigger_value`` bound to the trigger's parameter; never raises."""
    invocation_id = str(uuid.uuid4())
    outs: dict[str, Out] = {}
    kwargs: dict[str, Any] = {}
    trigger_name = spec.trigger.get("name")
    start = time.perf_counter()
    result = Result(invocation_id=invocation_id, succeeded=False)
    try:
        for param in spec.parameters:
            if param == trigger_name:
                kwargs[param] = trigger_value
            elif param == "context":
                kwargs[param] = Context(invocation_id, spec.name, spec.directory)
            elif any(b.get("name") == param and b.get("direction") == "OUT" for b in spec.bindings):
                outs[param] = kwargs[param] = Out()
            else:
                raise TypeError(f"parameter {param!r} of {spec.name} has no binding the dev host supports")
        log.debug("Executing 'Functions.%s' (Reason='%s', Id=%s)", spec.name, reason, invocation_id)
        if spec.is_async:
            future = asyncio.run_coroutine_threadsafe(spec.callable(**kwargs), _LOOP.get())
            value = future.result()
        else:
            value = spec.callable(**kwargs)
        result.return_value = value
        result.outputs = {name: out.get() for name, out in outs.items()}
        result.outputs["$return"] = value
        # Outputs are sent only after the function returned, and their failure fails
        # the invocation, as the host flushes output bindings before completing it.
        outputs.flush(spec, result.outputs)
        result.succeeded = True
    except Exception as exc:  # The host turns any exception into a failed invocation.
        result.error = exc
        log.error("Function 'Functions.%s' (Id=%s) failed", spec.name, invocation_id, exc_info=exc)
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
