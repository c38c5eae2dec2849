"""``python -m devhost.worker``: the Python language worker process, on Microsoft's ``azure-functions-runtime``.

The Functions host starts its language worker as a separate process with ``--host --port --workerId --requestId``;
the worker dials the host's ``FunctionRpc.EventStream`` (gRPC, bidirectional) and says ``StartStream``. From Python
3.13, Microsoft ships the worker's logic (indexing ``function_app.py``, binding conversion, invocation, the sync
thread pool) as the PyPI package ``azure-functions-runtime``, and a thin "proxy worker" in Azure does the gRPC part.
This module is that proxy for local runs: it hands every request to the pinned package unchanged, with the compiled
protocol module in ``request.properties["protos"]``, so indexing and invocation are the code Azure runs.

* Every request runs as its own asyncio task, so many invocations are in flight on one stream (the runtime runs
  sync functions in its thread pool, ``PYTHON_THREADPOOL_THREAD_COUNT``, and ``async def`` ones on this loop).
* Log records become ``RpcLog`` messages tagged with the invocation they belong to (the runtime's context variable,
  set here for async functions and by the runtime in its pool threads).
* The worker does not outlive the stream: when the host goes away the stream ends and so does the process (the host
  ends its worker on shutdown and restarts it when it dies).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import azure_functions_runtime as runtime
import grpc

from devhost.proto import FunctionRpc_pb2 as pb

EVENT_STREAM = "/AzureFunctionsRpcMessages.FunctionRpc/EventStream"
# The host's gRPC message limit (the Functions host raises it to int.MaxValue; 100 MB bodies must fit).
MAX_MESSAGE_BYTES = 2**31 - 1
SYSTEM_LOGGERS = ("azure_functions_worker", "azure_functions_runtime", "devhost.worker")

_LEVELS = {
    logging.CRITICAL: pb.RpcLog.Critical,
    logging.ERROR: pb.RpcLog.Error,
    logging.WARNING: pb.RpcLog.Warning,
    logging.INFO: pb.RpcLog.Information,
    logging.DEBUG: pb.RpcLog.Debug,
}


@dataclass
class WorkerRequest:
    """What ``azure_functions_runtime``'s coroutines take: the message and the proxy's properties."""

    name: str
    request: pb.StreamingMessage
    properties: dict[str, Any] = field(default_factory=dict)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m devhost.worker", description=__doc__)
    p.add_argument("--host", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--workerId", "--worker-id", dest="worker_id", required=True)
    p.add_argument("--requestId", "--request-id", dest="request_id", required=True)
    p.add_argument("--grpcMaxMessageLength", "--grpc-max-message-length", dest="max_message", type=int,
                   default=MAX_MESSAGE_BYTES)
    return p.parse_args(argv)


class RpcLogHandler(logging.Handler):
    """Sends every log record to the host as an ``RpcLog``, tagged with its invocation id (thread-safe)."""

    def __init__(self, send: Callable[[pb.StreamingMessage], None]) -> None:
        super().__init__(logging.DEBUG)
        self._send = send

    def emit(self, record: logging.LogRecord) -> None:
        try:
            invocation_id = runtime.invocation_id_cv.get() or ""
            system = record.name.startswith(SYSTEM_LOGGERS)
            message = self.format(record) if record.exc_info else record.getMessage()
            level = _LEVELS.get(record.levelno, pb.RpcLog.Information)
            log = pb.RpcLog(
                invocation_id=invocation_id,
                category=record.name,
                level=level,
                message=message,
                log_category=pb.RpcLog.System if system else pb.RpcLog.User,
            )
            self._send(pb.StreamingMessage(rpc_log=log))
        except Exception:  # noqa: BLE001 - logging must never fail the caller.
            self.handleError(record)


Handler = Callable[[WorkerRequest], Awaitable[Any]]
# request field -> (runtime coroutine, response field)
ROUTES: dict[str, tuple[Handler, str]] = {
    "worker_init_request": (runtime.worker_init_request, "worker_init_response"),
    "functions_metadata_request": (runtime.functions_metadata_request, "function_metadata_response"),
    "function_load_request": (runtime.function_load_request, "function_load_response"),
    "invocation_request": (runtime.invocation_request, "invocation_response"),
    "function_environment_reload_request": (
        runtime.function_environment_reload_request, "function_environment_reload_response",
    ),
}


def failure_response(response_field: str, request: pb.StreamingMessage, exc: BaseException) -> Any:
    """The response message ``response_field`` saying Failure with ``exc``, for the request it answers."""
    response = getattr(request, response_field).__class__()
    response.result.status = pb.StatusResult.Failure
    response.result.exception.message = f"{type(exc).__name__}: {exc}"
    response.result.exception.type = type(exc).__name__
    response.result.exception.stack_trace = "".join(traceback.format_exception(exc))
    kind = request.WhichOneof("content")
    if kind == "invocation_request":
        response.invocation_id = request.invocation_request.invocation_id
    elif kind == "function_load_request":
        response.function_id = request.function_load_request.function_id
    return response


class Worker:
    """One EventStream connection to the host."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.outbox: asyncio.Queue[pb.StreamingMessage | None] = asyncio.Queue()
        self.loop = asyncio.get_running_loop()
        self.tasks: set[asyncio.Task[None]] = set()
        self.properties = {"protos": pb, "host": args.host}

    def send(self, message: pb.StreamingMessage) -> None:
        """Queue a message for the host; callable from any thread."""
        try:
            self.loop.call_soon_threadsafe(self.outbox.put_nowait, message)
        except RuntimeError:  # The loop is closed: the stream is over.
            pass

    async def _outgoing(self) -> AsyncIterator[pb.StreamingMessage]:
        while True:
            message = await self.outbox.get()
            if message is None:
                return
            yield message

    async def handle(self, message: pb.StreamingMessage) -> None:
        kind = message.WhichOneof("content")
        if kind == "worker_status_request":
            self.send(pb.StreamingMessage(request_id=message.request_id, worker_status_response={}))
            return
        if kind == "worker_terminate":
            self.outbox.put_nowait(None)
            return
        if kind not in ROUTES:
            logging.getLogger("devhost.worker").warning("unsupported message %s ignored", kind)
            return
        coroutine, response_field = ROUTES[kind]
        if kind == "invocation_request":
            # The runtime reads this for async functions' logs; its pool threads set it themselves.
            runtime.invocation_id_cv.set(message.invocation_request.invocation_id)
        try:
            response = await coroutine(WorkerRequest(kind, message, self.properties))
        except Exception as exc:  # noqa: BLE001  - the host must get an answer, or it waits for ever
            # The runtime answers its own errors as a Failure result, but a few calls (1.3.0's
            # load_binding_registry in worker_init_request, for one) raise before its try. The real proxy worker
            # turns that into a Failure on the same request; a task that died silently would leave the host's
            # start-up or invocation waiting with no reason.
            response = failure_response(response_field, message, exc)
        else:
            if kind == "worker_init_request":
                # The runtime's sync pool: sized by PYTHON_THREADPOOL_THREAD_COUNT, as in Azure.
                runtime.start_threadpool_executor()
        self.send(pb.StreamingMessage(request_id=message.request_id, **{response_field: response}))

    async def run(self) -> None:
        target = f"{self.args.host}:{self.args.port}"
        options = [
            ("grpc.max_send_message_length", self.args.max_message),
            ("grpc.max_receive_message_length", self.args.max_message),
        ]
        async with grpc.aio.insecure_channel(target, options=options) as channel:
            call = channel.stream_stream(
                EVENT_STREAM,
                request_serializer=pb.StreamingMessage.SerializeToString,
                response_deserializer=pb.StreamingMessage.FromString,
            )(self._outgoing())
            self.send(pb.StreamingMessage(
                request_id=self.args.request_id, start_stream=pb.StartStream(worker_id=self.args.worker_id),
            ))
            try:
                async for message in call:
                    task = asyncio.create_task(self.handle(message))
                    self.tasks.add(task)
                    task.add_done_callback(self.tasks.discard)
            except grpc.aio.AioRpcError as exc:
                if exc.code() not in (grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAVAILABLE):
                    raise


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # Ctrl+C in a terminal sends SIGINT to the whole foreground process group, this worker included. The host owns
    # the worker's lifetime: it lets running invocations finish within its grace period and then ends the worker
    # (LanguageWorker.stop), so the terminal's SIGINT must not kill them first. A no-op handler, not SIG_IGN: an
    # ignored signal would be inherited across exec by the attempt processes the functions start.
    signal.signal(signal.SIGINT, lambda signum, frame: None)
    # The app's own folder first on sys.path, as the host starts the worker there (its packages win).
    sys.path.insert(0, os.getcwd())

    async def go() -> None:
        worker = Worker(args)
        root = logging.getLogger()
        root.handlers[:] = [RpcLogHandler(worker.send)]
        root.setLevel(logging.INFO)
        logging.getLogger("azure").setLevel(logging.WARNING)
        await worker.run()

    asyncio.run(go())
    # Pool threads of abandoned invocations must not keep the process alive once the host is gone.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    raise SystemExit(main())
