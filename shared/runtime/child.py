"""The process a pipeline attempt runs in: ``python -m shared.runtime.child SPEC EVENT_FD``.

Running each attempt in its own OS process means a crash, an out-of-memory
kill or a segfault in pipeline code fails that attempt only; the Functions
host and its other invocations carry on. The parent (``shared.runtime.runner``) talks
to this process over two pipes:

* events, child → parent, one JSON object per line on ``EVENT_FD``, each one of
  ``shared.runtime.protocol.Event``: progress, usage, log, meter, then exactly one
  terminal event (done, error, cancelled or suspended);
* control, parent → child, on stdin: the line ``cancel``. End of file on stdin
  means the parent is gone, and the child exits rather than run on unowned.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ValidationError

from shared.core.names import checkpoint_blob_name
from shared.core.registry import load_function, load_ref
from shared.observability.metering import METER
from shared.runtime import protocol
from shared.runtime.protocol import AttemptSpec
from shared.sdk.errors import Cancelled, PipelineError
from shared.sdk.fanout_types import MapResult, Suspend

if TYPE_CHECKING:
    from shared.core.lifecycle import Lifecycle
    from shared.core.ports import Stores

# The parent throttles table writes; this only keeps the pipe from flooding.
_PROGRESS_EVERY = 0.2
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_ORPHANED = 70


class EventSink(Protocol):
    """Where the attempt's events go: the pipe to the parent (:class:`_Events`), or a list in-process."""

    def emit(self, event: BaseModel) -> None: ...


class _Events:
    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def emit(self, event: BaseModel) -> None:
        line = protocol.encode(event)
        with self._lock:
            self._stream.write(line + "\n")
            self._stream.flush()


class _EventLogHandler(logging.Handler):
    """Sends the pipeline's log records to the parent, which logs them with the job's context."""

    def __init__(self, events: EventSink) -> None:
        super().__init__(logging.INFO)
        self._events = events

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._events.emit(
                protocol.LogEvent(level=record.levelname, logger=record.name, message=record.getMessage()[:1000])
            )
        except Exception:  # noqa: BLE001 - logging must never kill the pipeline
            self.handleError(record)


class ChildContext:
    """The :class:`shared.sdk.pipeline.PipelineContext` given to pipeline code."""

    def __init__(self, spec: AttemptSpec, events: EventSink, stores: Callable[[], Stores]) -> None:
        """``stores`` builds the stores checkpoints and ``map()`` write through, on first use (see :func:`main`)."""
        self.job_id: str = spec.job_id
        self.tenant: str = spec.tenant
        self.attempt: int = spec.attempt
        self.logger = logging.getLogger(f"thematiq.pipeline.{spec.pipeline}")
        self._events = events
        self._cancel = threading.Event()
        self._last_progress = 0.0
        self._max_attempts = spec.max_attempts
        self._make_stores = stores
        self._stores: Stores | None = None
        self._lifecycle: Lifecycle | None = None

    def _get_stores(self) -> Stores:
        # Built on first use: the storage SDK costs about a second of start-up,
        # which pipelines that never checkpoint or fan out should not pay on every attempt.
        if self._stores is None:
            self._stores = self._make_stores()
        return self._stores

    def progress(self, stage: str, processed: int = 0, total: int | None = None, message: str = "") -> None:
        now = time.monotonic()
        final = total is not None and processed >= total
        if final or now - self._last_progress >= _PROGRESS_EVERY:
            self._last_progress = now
            self._events.emit(protocol.ProgressEvent(stage=stage, processed=processed, total=total, message=message))

    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def request_cancel(self) -> None:
        """The parent asked this attempt to stop (the ``cancel`` line, or a cancel the in-process runner saw)."""
        self._cancel.set()

    def raise_if_cancelled(self) -> None:
        if self._cancel.is_set():
            raise Cancelled("cancelled by request")

    def checkpoint(self, name: str, data: bytes) -> None:
        self._get_stores().blobs.put(checkpoint_blob_name(self.tenant, self.job_id, name), data)

    def restore(self, name: str) -> bytes | None:
        return self._get_stores().blobs.get_optional(checkpoint_blob_name(self.tenant, self.job_id, name))

    def usage(self, **counters: float) -> None:
        self._events.emit(protocol.UsageEvent(counters=counters))

    def map(
        self,
        stage: str,
        items: list[Any],
        fn: Callable[..., Any],
        *,
        chunk_size: int | None = None,
        error_budget: float = 0.0,
    ) -> MapResult:
        from shared.runtime.fanout import map_stage

        return map_stage(
            tenant=self.tenant,
            job_id=self.job_id,
            stage=stage,
            items=items,
            fn=fn,
            chunk_size=chunk_size,
            error_budget=error_budget,
            max_attempts=self._max_attempts,
            lifecycle=self._get_lifecycle(),
        )

    def _get_lifecycle(self) -> Lifecycle:
        # Built on first use, after the process started: no storage client exists before it is needed.
        if self._lifecycle is None:
            from shared.core.lifecycle import Lifecycle

            self._lifecycle = Lifecycle(self._get_stores())
        return self._lifecycle

    def _watch_control(self, stream: IO[str]) -> None:
        for line in stream:
            if line.strip() == "cancel":
                self.request_cancel()
        # stdin closed: the parent died (or was SIGKILLed with its host). Nobody
        # owns this attempt any more; the reaper will hand the job to a new one.
        os._exit(EXIT_ORPHANED)


def _attempt_stores() -> Stores:
    """The attempt process's stores: on the account the host's settings name (passed in this process's environment).

    This process is a composition root of its own (the host's ``shared.platform`` cannot be handed across a fork
    or an exec), which is why import-linter lets this one function of ``shared.runtime`` build concrete stores.
    """
    from shared.storage.assembly import azure_stores

    return azure_stores()


def main(argv: list[str]) -> int:
    spec = AttemptSpec.model_validate_json(Path(argv[1]).read_text())
    events = _Events(os.fdopen(int(argv[2]), "w", buffering=1, encoding="utf-8"))
    root = logging.getLogger()
    root.handlers[:] = [_EventLogHandler(events)]
    root.setLevel(logging.INFO)
    # Storage SDK request logs are noisy and may carry URLs with job ids only; keep them out.
    logging.getLogger("azure").setLevel(logging.WARNING)
    ctx = ChildContext(spec, events, _attempt_stores)
    threading.Thread(target=ctx._watch_control, args=(sys.stdin,), daemon=True).start()
    # The job's token budget spans processes (start from what earlier ones spent), and the LLM cache is per tenant.
    from shared.llm import scope_to_job

    scope_to_job(spec.tenant, spec.llm_tokens_used, spec.llm_token_limit)
    try:
        terminal = run_attempt(ctx, spec)
        events.emit(terminal)
    finally:
        # METER is this process's own: the attempt's process is its own composition root (a Platform cannot be
        # handed across a fork or an exec), and its Azure clients' hook feeds METER; the host adds the counts to
        # its platform's meter (shared.runtime.runner).
        events.emit(protocol.MeterEvent(counts=dict(METER.snapshot())))
    return EXIT_ERROR if isinstance(terminal, protocol.Failed) else EXIT_OK


def run_attempt(ctx: ChildContext, spec: AttemptSpec) -> protocol.Terminal:
    """Run the attempt ``spec`` names in this process; the terminal event that says how it ended.

    The result is in ``spec.result_path`` (written before the event, so a ``Done`` always has its file). Used
    by :func:`main` and by the in-memory platform's runner (``shared.runtime.inprocess``), which runs attempts in
    the caller's thread.
    """
    try:
        pipeline = load_ref(spec.pipeline_ref)
        params = pipeline.params_model.model_validate(spec.params)
        data = json.loads(Path(spec.input_path).read_text(encoding="utf-8"))
        if spec.mode == "map":
            # One chunk of a map stage: the function named by the chunk, on the chunk's items.
            result = load_function(spec.fn_ref or "")(ctx, params, data)
        else:
            result = pipeline.run(ctx, params, data)
        binary = isinstance(result, bytes | bytearray)
        result_path = Path(spec.result_path)
        if binary:
            result_path.write_bytes(bytes(result))
        else:
            result_path.write_text(json.dumps(result, separators=(",", ":"), ensure_ascii=False))
        return protocol.Done(binary=binary)
    except Suspend as suspend:
        return protocol.Suspended(stage=suspend.stage, chunks=suspend.chunks)
    except Cancelled:
        return protocol.CancelledEvent()
    except PipelineError as err:
        return protocol.Failed(type=type(err).__name__, message=str(err), retryable=err.retryable)
    except (ValidationError, TypeError, ValueError) as err:
        # Input or params the pipeline cannot use, or a result that is not
        # JSON-serialisable: another attempt would fail the same way.
        retryable = not isinstance(err, ValidationError) and not _is_json_error(err)
        return protocol.Failed(type=type(err).__name__, message=str(err), retryable=retryable)
    except MemoryError:
        return protocol.Failed(type="MemoryError", message="the pipeline ran out of memory", retryable=True)
    except Exception as err:  # noqa: BLE001 - every other failure is reported, then retried
        return protocol.Failed(type=type(err).__name__, message=str(err), retryable=True)


def _is_json_error(err: Exception) -> bool:
    return "JSON serializable" in str(err)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
