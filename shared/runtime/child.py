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
from typing import IO, TYPE_CHECKING, Any

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
    from shared.storage.blobs import BlobStore

# The parent throttles table writes; this only keeps the pipe from flooding.
_PROGRESS_EVERY = 0.2
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_ORPHANED = 70


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

    def __init__(self, events: _Events) -> None:
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

    def __init__(self, spec: AttemptSpec, events: _Events) -> None:
        self.job_id: str = spec.job_id
        self.tenant: str = spec.tenant
        self.attempt: int = spec.attempt
        self.logger = logging.getLogger(f"thematiq.pipeline.{spec.pipeline}")
        self._events = events
        self._cancel = threading.Event()
        self._last_progress = 0.0
        self._max_attempts = spec.max_attempts
        self._blobs: BlobStore | None = None
        self._lifecycle: Lifecycle | None = None

    def _store(self) -> BlobStore:
        # Imported on first use: the storage SDK costs about a second of start-up,
        # which pipelines that never checkpoint should not pay on every attempt.
        if self._blobs is None:
            from shared.storage.blobs import BlobStore

            self._blobs = BlobStore()
        return self._blobs

    def progress(self, stage: str, processed: int = 0, total: int | None = None, message: str = "") -> None:
        now = time.monotonic()
        final = total is not None and processed >= total
        if final or now - self._last_progress >= _PROGRESS_EVERY:
            self._last_progress = now
            self._events.emit(protocol.ProgressEvent(stage=stage, processed=processed, total=total, message=message))

    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def raise_if_cancelled(self) -> None:
        if self._cancel.is_set():
            raise Cancelled("cancelled by request")

    def checkpoint(self, name: str, data: bytes) -> None:
        self._store().put(checkpoint_blob_name(self.tenant, self.job_id, name), data)

    def restore(self, name: str) -> bytes | None:
        return self._store().get_optional(checkpoint_blob_name(self.tenant, self.job_id, name))

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
            from shared.storage import azure_stores

            self._lifecycle = Lifecycle(azure_stores())
        return self._lifecycle

    def _watch_control(self, stream: IO[str]) -> None:
        for line in stream:
            if line.strip() == "cancel":
                self._cancel.set()
        # stdin closed: the parent died (or was SIGKILLed with its host). Nobody
        # owns this attempt any more; the reaper will hand the job to a new one.
        os._exit(EXIT_ORPHANED)


def main(argv: list[str]) -> int:
    spec = AttemptSpec.model_validate_json(Path(argv[1]).read_text())
    events = _Events(os.fdopen(int(argv[2]), "w", buffering=1, encoding="utf-8"))
    root = logging.getLogger()
    root.handlers[:] = [_EventLogHandler(events)]
    root.setLevel(logging.INFO)
    # Storage SDK request logs are noisy and may carry URLs with job ids only; keep them out.
    logging.getLogger("azure").setLevel(logging.WARNING)
    ctx = ChildContext(spec, events)
    threading.Thread(target=ctx._watch_control, args=(sys.stdin,), daemon=True).start()
    code = EXIT_ERROR
    # The job's token budget spans processes: start from what earlier ones spent.
    from shared.llm.client import set_job_allowance

    set_job_allowance(spec.llm_tokens_used, spec.llm_token_limit if spec.llm_token_limit is not None else 1 << 62)
    # The LLM cache is per tenant: a cached answer is never served to, or probed by, another tenant.
    from shared.llm.cache import set_cache_scope

    set_cache_scope(spec.tenant)
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
        events.emit(protocol.Done(binary=binary))
        code = EXIT_OK
    except Suspend as suspend:
        events.emit(protocol.Suspended(stage=suspend.stage, chunks=suspend.chunks))
        code = EXIT_OK
    except Cancelled:
        events.emit(protocol.CancelledEvent())
        code = EXIT_OK
    except PipelineError as err:
        events.emit(protocol.Failed(type=type(err).__name__, message=str(err), retryable=err.retryable))
    except (ValidationError, TypeError, ValueError) as err:
        # Input or params the pipeline cannot use, or a result that is not
        # JSON-serialisable: another attempt would fail the same way.
        retryable = not isinstance(err, ValidationError) and not _is_json_error(err)
        events.emit(protocol.Failed(type=type(err).__name__, message=str(err), retryable=retryable))
    except MemoryError:
        events.emit(protocol.Failed(type="MemoryError", message="the pipeline ran out of memory", retryable=True))
    except Exception as err:  # noqa: BLE001 - every other failure is reported, then retried
        events.emit(protocol.Failed(type=type(err).__name__, message=str(err), retryable=True))
    finally:
        events.emit(protocol.MeterEvent(counts=dict(METER.snapshot())))
    return code


def _is_json_error(err: Exception) -> bool:
    return "JSON serializable" in str(err)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
