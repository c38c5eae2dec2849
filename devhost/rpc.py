"""devhost as the Functions host: the host side of the Functions RPC protocol, and the worker process it runs.

The Functions host serves ``FunctionRpc.EventStream`` (gRPC) and starts the language worker as a child process,
which dials back. The sequence, as the host runs it (measured against Microsoft's worker, /work/shared/README.md):

1. worker -> ``start_stream{worker_id}``;
2. host -> ``worker_init_request{host_version, capabilities, worker_directory, function_app_directory}``; the Python
   runtime indexes ``function_app.py`` here, and a failure (an import error, or one function the runtime refuses)
   comes back as ``result.status`` Failure with the runtime's own message: start-up stops with it;
3. host -> ``functions_metadata_request``: the indexed functions, with the raw binding JSON devhost routes by;
4. host -> one ``function_load_request`` per function;
5. host -> ``invocation_request``s, many in flight, matched to their ``invocation_response`` by ``invocation_id``;
   ``rpc_log`` arrives at any time, tagged with the invocation id.

A worker that dies (its stream ends) fails every invocation in flight at once (:class:`WorkerDied`; a queue message
then becomes visible again, as in Azure) and is started again, indexed and loaded before new invocations go out.
:meth:`LanguageWorker.stop` ends the worker: it does not outlive devhost.
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent import futures
from datetime import timedelta
from pathlib import Path
from typing import Any

import grpc

from devhost.convert import WorkerCapabilities
from devhost.proto import FunctionRpc_pb2 as pb

log = logging.getLogger("devhost")

REPO_ROOT = Path(__file__).resolve().parent.parent
EVENT_STREAM_SERVICE = "AzureFunctionsRpcMessages.FunctionRpc"
HOST_VERSION = "4.1040.0.0"
# What the Functions host 4.x puts in WorkerInitRequest.capabilities (GrpcWorkerChannel.SendWorkerInitRequest):
# "FunctionDataCache" only when the app enables the shared-memory cache (off by default, and devhost has none),
# "V2Compatable" only in v2 compatibility mode, and "MultiStream" (extra streams with the same worker id), which
# devhost does not offer: it serves one stream per worker and its worker never opens a second. So: nothing. The
# six names the worker answers with (RawHttpBodyBytes, RpcHttpBodyOnly, ...) are *worker* capabilities: what the
# host may then do, which devhost honours per worker (:class:`WorkerCapabilities`).
HOST_CAPABILITIES: dict[str, str] = {}
MAX_MESSAGE_BYTES = 2**31 - 1
START_TIMEOUT_SECONDS = 60.0
_LOG_LEVELS = {
    pb.RpcLog.Trace: logging.DEBUG,
    pb.RpcLog.Debug: logging.DEBUG,
    pb.RpcLog.Information: logging.INFO,
    pb.RpcLog.Warning: logging.WARNING,
    pb.RpcLog.Error: logging.ERROR,
    pb.RpcLog.Critical: logging.CRITICAL,
}


class WorkerDied(RuntimeError):
    """The worker process ended while an invocation was in flight."""


class IndexingFailed(RuntimeError):
    """The runtime refused the app; the message is the runtime's own."""


class FunctionTimeout(RuntimeError):
    """The invocation ran past host.json's ``functionTimeout`` (the host's FunctionTimeoutException)."""


def timespan(seconds: float) -> str:
    """``hh:mm:ss`` (with fractions when there are some), as .NET prints a TimeSpan in the host's messages."""
    whole = int(seconds)
    text = f"{whole // 3600:02d}:{whole % 3600 // 60:02d}:{whole % 60:02d}"
    frac = seconds - whole
    return text + (f"{frac:.7f}"[1:] if frac else "")


def status_message(result: pb.StatusResult) -> str:
    exc = result.exception
    return exc.message or result.result or "no reason given"


class _Stream:
    """One EventStream connection: an outbox the gRPC server drains and the worker's messages, read in a thread."""

    def __init__(self) -> None:
        self.outbox: queue.Queue[pb.StreamingMessage | None] = queue.Queue()
        self.closed = threading.Event()

    def outgoing(self) -> Iterator[pb.StreamingMessage]:
        while True:
            message = self.outbox.get()
            if message is None:
                return
            yield message

    def close(self) -> None:
        self.outbox.put(None)
        self.closed.set()


class LanguageWorker:
    """Serves the EventStream and runs one worker process; restarts it when it dies."""

    def __init__(
        self, app_dir: Path, env: dict[str, str] | None = None, worker_args: list[str] | None = None
    ) -> None:
        self.app_dir = app_dir.resolve()
        self.env = env
        #: What follows the interpreter on the worker's command line before the host's arguments.
        self.worker_args = worker_args or ["-m", "devhost.worker"]
        self._lock = threading.Lock()
        self._pending: dict[str, futures.Future[pb.StreamingMessage]] = {}
        self._stream: _Stream | None = None
        self._connected = threading.Condition(self._lock)
        self._ready = threading.Event()
        self._stopping = threading.Event()
        self._proc: subprocess.Popen[bytes] | None = None
        #: The worker id of the process this host started last: only its StartStream may take the stream. Any
        #: process on the machine can open the loopback port, and the stream carries function keys and bodies.
        self._worker_id: str | None = None
        self.metadata: list[pb.RpcFunctionMetadata] = []
        #: What the running worker declared in its WorkerInitResponse; devhost's conversions follow it.
        self.capabilities = WorkerCapabilities({})
        #: Seconds of the last start, by phase (printed at start-up; bench/platform.py reads the line).
        self.start_phases: dict[str, float] = {}
        self.restarts = 0
        # Kept to shut down in stop(): grpc's server.stop() leaves the executor it was given running.
        self._executor = futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="devhost-grpc")
        self._server = grpc.server(
            self._executor,
            options=[
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ],
        )
        handler = grpc.method_handlers_generic_handler(EVENT_STREAM_SERVICE, {
            "EventStream": grpc.stream_stream_rpc_method_handler(
                self._event_stream,
                request_deserializer=pb.StreamingMessage.FromString,
                response_serializer=pb.StreamingMessage.SerializeToString,
            ),
        })
        self._server.add_generic_rpc_handlers((handler,))
        self.port = self._server.add_insecure_port("127.0.0.1:0")
        self._server.start()

    # --- the gRPC side -------------------------------------------------------------------------------------------

    def _event_stream(
        self, incoming: Iterator[pb.StreamingMessage], context: grpc.ServicerContext
    ) -> Iterator[pb.StreamingMessage]:
        stream = _Stream()
        threading.Thread(target=self._read, args=(incoming, stream), name="devhost-rpc-read", daemon=True).start()
        return stream.outgoing()

    def _read(self, incoming: Iterator[pb.StreamingMessage], stream: _Stream) -> None:
        try:
            for message in incoming:
                if not self._dispatch(message, stream):
                    break
        except grpc.RpcError:
            pass  # The worker went away: handled below, like a clean end of stream.
        finally:
            stream.close()
            self._stream_ended(stream)

    def _dispatch(self, message: pb.StreamingMessage, stream: _Stream) -> bool:
        """Handle one message of a stream; False ends that stream (a StartStream from a worker we did not start)."""
        kind = message.WhichOneof("content")
        if kind == "start_stream":
            with self._lock:
                if self._worker_id is None or message.start_stream.worker_id != self._worker_id:
                    log.warning("refused a language worker stream with an unknown worker id")
                    return False
                self._stream = stream
                self._connected.notify_all()
            return True
        if stream is not self._stream:
            return True  # Not (or no longer) the stream we serve: nothing it says answers our requests.
        if kind == "rpc_log":
            self._log(message.rpc_log)
            return True
        key = message.invocation_response.invocation_id if kind == "invocation_response" else message.request_id
        with self._lock:
            future = self._pending.pop(key, None)
        if future is not None:
            future.set_result(message)
        elif kind != "worker_status_response":
            log.debug("unmatched %s from the worker", kind)
        return True

    def _log(self, record: pb.RpcLog) -> None:
        level = _LOG_LEVELS.get(record.level, logging.INFO)
        if record.log_category == pb.RpcLog.System and level < logging.WARNING:
            return  # The runtime's own chatter (the host logs it only with verbose logging).
        tag = f" (Id={record.invocation_id})" if record.invocation_id else ""
        log.log(level, "%s%s", record.message, tag)

    def _stream_ended(self, stream: _Stream) -> None:
        with self._lock:
            if self._stream is not stream:
                return
            self._stream = None
            pending, self._pending = self._pending, {}
            was_ready = self._ready.is_set()
            self._ready.clear()
        for future in pending.values():
            future.set_exception(WorkerDied("the language worker process exited"))
        if pending:
            log.error("language worker exited with %d invocations in flight: they failed", len(pending))
        # Only a worker that was serving is restarted here; one that dies while starting fails start() instead
        # (the first start stops devhost; a restart's own loop tries again).
        if was_ready and not self._stopping.is_set():
            threading.Thread(target=self._restart, name="devhost-worker-restart", daemon=True).start()

    def _send(self, message: pb.StreamingMessage, key: str) -> futures.Future[pb.StreamingMessage]:
        future: futures.Future[pb.StreamingMessage] = futures.Future()
        with self._lock:
            stream = self._stream
            if stream is None:
                raise WorkerDied("no language worker is connected")
            self._pending[key] = future
            stream.outbox.put(message)
        return future

    def _request(self, timeout: float | None = None, **content: Any) -> pb.StreamingMessage:
        request_id = str(uuid.uuid4())
        future = self._send(pb.StreamingMessage(request_id=request_id, **content), request_id)
        try:
            return future.result(timeout)
        except futures.TimeoutError:
            with self._lock:
                self._pending.pop(request_id, None)
            raise

    # --- the worker process --------------------------------------------------------------------------------------

    def start(self, timeout: float = START_TIMEOUT_SECONDS) -> list[pb.RpcFunctionMetadata]:
        """Start the worker, index and load the app; raises :class:`IndexingFailed` with the runtime's reason."""
        deadline = time.monotonic() + timeout
        worker_id = str(uuid.uuid4())
        request_id = str(uuid.uuid4())
        with self._lock:
            self._worker_id = worker_id
        env = {**os.environ, **(self.env or {})}
        # devhost.worker must be importable; the app's own folder comes first (the worker puts cwd first).
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
        cmd = [
            sys.executable, *self.worker_args, "--host", "127.0.0.1", "--port", str(self.port),
            "--workerId", worker_id, "--requestId", request_id, "--grpcMaxMessageLength", str(MAX_MESSAGE_BYTES),
        ]
        # stdout/stderr go where devhost's go, as the host copies the worker's console into its log.
        began = time.monotonic()
        self._proc = subprocess.Popen(cmd, cwd=self.app_dir, env=env, stdin=subprocess.DEVNULL)
        with self._lock:
            while self._stream is None:
                if self._proc.poll() is not None:
                    raise IndexingFailed(f"the language worker exited with {self._proc.returncode} before connecting")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise IndexingFailed(f"the language worker did not connect within {timeout:.0f}s")
                self._connected.wait(min(left, 0.2))
        connected = time.monotonic()
        init = self._request(
            timeout=max(1.0, deadline - time.monotonic()),
            worker_init_request=pb.WorkerInitRequest(
                host_version=HOST_VERSION,
                capabilities=HOST_CAPABILITIES,
                worker_directory=str(REPO_ROOT / "devhost"),
                function_app_directory=str(self.app_dir),
            ),
        ).worker_init_response
        if init.result.status != pb.StatusResult.Success:
            raise IndexingFailed(status_message(init.result))
        self.capabilities = WorkerCapabilities(dict(init.capabilities))
        initialised = time.monotonic()
        meta = self._request(
            timeout=max(1.0, deadline - time.monotonic()),
            functions_metadata_request=pb.FunctionsMetadataRequest(function_app_directory=str(self.app_dir)),
        ).function_metadata_response
        if meta.result.status != pb.StatusResult.Success:
            raise IndexingFailed(status_message(meta.result))
        indexed = time.monotonic()
        loads = [
            self._send(
                pb.StreamingMessage(
                    request_id=fm.function_id,
                    function_load_request=pb.FunctionLoadRequest(function_id=fm.function_id, metadata=fm),
                ),
                fm.function_id,
            )
            for fm in meta.function_metadata_results
        ]
        for fm, future in zip(meta.function_metadata_results, loads, strict=True):
            loaded = future.result(max(1.0, deadline - time.monotonic())).function_load_response
            if loaded.result.status != pb.StatusResult.Success:
                raise IndexingFailed(f"function {fm.name}: {status_message(loaded.result)}")
        self.metadata = list(meta.function_metadata_results)
        done = time.monotonic()
        self.start_phases = {
            "connect": connected - began, "init": initialised - connected, "metadata": indexed - initialised,
            "load": done - indexed, "total": done - began,
        }
        # One line per start, so a slow start says where its time went (bench/platform.py parses it).
        log.info(
            "language worker pid %s started in %.2fs: process start to StartStream %.2fs, WorkerInitRequest "
            "(the runtime imports and indexes the app) %.2fs, FunctionsMetadataRequest %.2fs, %d FunctionLoadRequests "
            "%.2fs", self.pid, self.start_phases["total"], self.start_phases["connect"], self.start_phases["init"],
            self.start_phases["metadata"], len(self.metadata), self.start_phases["load"],
        )
        self._ready.set()
        return self.metadata

    def _restart(self) -> None:
        self._reap()
        while not self._stopping.is_set():
            self.restarts += 1
            log.warning("restarting the language worker (restart %d)", self.restarts)
            try:
                self.start()
                log.info("language worker restarted (pid %s)", self.pid)
                return
            except Exception as exc:  # noqa: BLE001 - keep trying, as the host restarts a dead worker.
                log.error("language worker restart failed: %s", exc)
                self._reap()
                self._stopping.wait(1.0)

    def _reap(self) -> None:
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
        proc.wait()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def invoke(
        self,
        request: pb.InvocationRequest,
        ready_timeout: float = START_TIMEOUT_SECONDS,
        timeout: float | None = None,
        function_name: str = "",
    ) -> pb.InvocationResponse:
        """Send one invocation and wait for its answer; :class:`WorkerDied` if the worker ends meanwhile.

        ``timeout`` is host.json's ``functionTimeout``. Past it the invocation fails with :class:`FunctionTimeout` and
        the worker running it is restarted, as the host does for an out-of-process worker
        (``WebScriptHostExceptionHandler.OnTimeoutExceptionAsync`` -> ``RestartWorkerWithInvocationIdAsync``): a sync
        Python function cannot be cancelled, so only ending its process stops it. Every other invocation in flight
        on that worker fails with it (the host disposes the whole channel), and queue messages become visible again.
        """
        if not self._ready.wait(ready_timeout):
            raise WorkerDied("the language worker is not running")
        invocation_id = request.invocation_id
        with self._lock:
            proc = self._proc
        future = self._send(pb.StreamingMessage(invocation_request=request), invocation_id)
        try:
            return future.result(timeout).invocation_response
        except futures.TimeoutError:
            pass
        with self._lock:
            pending = self._pending.pop(invocation_id, None)
        if pending is None:  # It answered, or its worker died, just as the timer fired.
            return future.result().invocation_response
        limit = timespan(timeout or 0)
        log.error("Timeout value of %s exceeded by function 'Functions.%s' (Id: '%s'). Initiating cancellation.",
                  limit, function_name, invocation_id)
        error = FunctionTimeout(f"Timeout value of {limit} was exceeded by function: Functions.{function_name}")
        pending.set_exception(error)
        log.warning("A function timeout has occurred. Restarting worker process executing invocationId '%s'.",
                    invocation_id)
        self._kill(proc)
        raise error

    def _kill(self, proc: subprocess.Popen[bytes] | None) -> None:
        """End ``proc`` if it is still the worker: its stream then ends, which fails the rest and restarts it."""
        with self._lock:
            current = proc is not None and proc is self._proc
        if current and proc is not None and proc.poll() is None:
            proc.kill()

    def stop(self, grace: float = 5.0) -> None:
        """End the worker process (SIGTERM, then SIGKILL) and the gRPC server."""
        self._stopping.set()
        proc = self._proc
        if proc is not None and proc.poll() is None and self.capabilities.handles_worker_terminate:
            # A worker that declared HandlesWorkerTerminateMessage is asked first, with the grace period, as the
            # host does; Microsoft's Python runtime does not declare it, so it gets the signal below.
            with self._lock:
                stream = self._stream
            if stream is not None:
                terminate = pb.WorkerTerminate()
                terminate.grace_period.FromTimedelta(timedelta(seconds=grace))
                stream.outbox.put(pb.StreamingMessage(worker_terminate=terminate))
                try:
                    proc.wait(grace)
                except subprocess.TimeoutExpired:
                    pass
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(grace)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        with self._lock:
            if self._stream is not None:
                self._stream.close()
        self._server.stop(grace=0)
        self._executor.shutdown(wait=False)
