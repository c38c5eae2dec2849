"""Supervise one pipeline attempt in a child process.

While the child runs, the parent (the queue-triggered function):

* renews the job's heartbeat every ``HEARTBEAT_SECONDS``;
* relays progress, at most one table write per ``PROGRESS_MIN_INTERVAL_SECONDS``;
* notices a cancellation request (every write is conditional on the ETag, so a
  cancel from the API makes the next write fail with 412; the re-read shows
  ``cancel_requested``), asks the child to stop, and kills it after
  ``CANCEL_GRACE_SECONDS``;
* notices that it lost the job (the reaper gave it to another attempt) and
  kills the child without writing anything more;
* fences itself: once the lease could not be renewed for ``FENCE_FRACTION`` of
  ``HEARTBEAT_STALE_SECONDS`` (Storage unreachable from this instance), it kills
  the child and reports ``lost`` *before* the reaper could hand the job to a new
  attempt, so two attempts never run at once;
* enforces the pipeline's timeout.
"""

from __future__ import annotations

import json
import logging
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import IO, Any, Generic, Literal, Protocol, TypeVar

from opentelemetry.trace import Span

from shared.config.constants import FENCE_FRACTION
from shared.config.settings import Settings
from shared.core.chunks import Chunk
from shared.core.errors import LostClaim, StorageUnavailable
from shared.core.jobs import Job, JobError, Progress, Status
from shared.core.leased import R, StoredResult, kind_of
from shared.core.lifecycle import Ending, Lifecycle, first_message
from shared.core.messages import BadMessage, ChunkMessage, JobMessage
from shared.core.ports import Stores
from shared.core.registry import Registry, default_registry
from shared.observability import telemetry
from shared.observability.metering import TransactionMeter
from shared.runtime import protocol
from shared.runtime.admission import MemoryBudget
from shared.runtime.blas import ONE_BLAS_THREAD
from shared.runtime.protocol import AttemptSpec
from shared.sdk.pipeline import Pipeline
from shared.sdk.retry import RetryDecision, RetryPolicy

APP_ROOT = Path(__file__).resolve().parents[2]


def child_env() -> dict[str, str]:
    """The environment of an attempt's process, and of the zygote that forks them (so the numpy it pre-imports
    starts its BLAS on one thread): the host's, one BLAS thread (``shared.runtime.blas``: a result must not depend
    on the instance's core count), and the app on the import path."""
    return {**os.environ, **ONE_BLAS_THREAD, "PYTHONPATH": os.pathsep.join([str(APP_ROOT), *sys.path])}


#: How long the pipeline process may linger after it reported how the attempt ended.
_EXIT_GRACE_SECONDS = 5.0
log = logging.getLogger(__name__)

M = TypeVar("M")

ResultKind = Literal["succeeded", "failed", "cancelled", "lost", "suspended"]


class Lease(Protocol):
    """What the runner keeps alive while the attempt runs: a job's or a chunk's claim."""

    label: str
    #: When the claim's heartbeat was last written (``time.monotonic()``): where the fence starts counting.
    renewed_at: float

    def renew(self, progress: Progress | None) -> bool:
        """Conditionally renew the heartbeat (and write progress). True once a cancel was requested.

        Raises :class:`LostClaim` when someone else owns the work now, and
        :class:`StorageUnavailable` when the renewal's outcome could not be learnt.
        """


class RowLease(Generic[R]):
    """The claim on a running job or chunk (a :class:`Lease`): heartbeat and progress through the lifecycle.

    Subclasses say only how a stop is requested (:meth:`stop_requested`): a job by its cancel flag, a chunk
    by its parent.
    """

    def __init__(self, lifecycle: Lifecycle, row: R, label: str, claimed_at: float | None = None) -> None:
        self.lifecycle = lifecycle
        self.row: R = row
        self.label = label
        #: The claim's heartbeat (monotonic): the runner's fence counts from here, not from when it started.
        self.renewed_at = time.monotonic() if claimed_at is None else claimed_at

    def renew(self, progress: Progress | None) -> bool:
        renewed = self.lifecycle.renew(self.row, progress)
        if not renewed.applied:
            raise LostClaim(f"{kind_of(self.row).name} is now {renewed.row.status} owned by {renewed.row.owner}")
        self.row = renewed.row
        self.renewed_at = time.monotonic()
        return self.stop_requested()

    def stop_requested(self) -> bool:
        raise NotImplementedError


@dataclass
class AttemptResult:
    """How the attempt's process said the attempt ended (or ``lost``: the claim went elsewhere)."""

    kind: ResultKind
    result: bytes | None = None
    error: JobError | None = None
    retryable: bool = False
    usage: dict[str, float] = field(default_factory=dict)
    #: The latest progress the pipeline reported, written with the final state.
    progress: Progress | None = None
    #: The result is raw bytes rather than JSON (map-stage chunks may return either).
    binary: bool = False
    #: For ``suspended``: the map stage the pipeline fanned out (see shared.runtime.fanout).
    suspended: protocol.Suspended | None = None
    #: The Storage transactions the attempt's process made (``service:operation`` → count), for the host's meter.
    storage_ops: dict[str, int] = field(default_factory=dict)


class ChildProcess(Protocol):
    """The attempt's process as the runner sees it: ``subprocess.Popen``, or a forked child of the zygote."""

    pid: int
    stdin: IO[bytes] | None

    @property
    def returncode(self) -> Any: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


class Runner(Protocol):
    def run(self, input_value: Any) -> AttemptResult: ...


#: Builds the runner of one attempt: ``AttemptRunner`` (a child process), or another strategy.
RunnerFactory = Callable[[Lease, AttemptSpec, float, Settings], Runner]


def default_runner(settings: Settings | None = None) -> RunnerFactory:
    """The runner ``ATTEMPT_PROCESS`` selects: ``fork`` (a warm zygote; Linux) or ``spawn`` (a fresh interpreter)."""
    from shared.config.settings import get_settings

    mode = (settings or get_settings()).attempt_process
    if mode == "fork":
        from shared.runtime.prefork import ForkRunner, fork_supported, prewarm

        if fork_supported():
            prewarm()
            return ForkRunner
        log.warning("ATTEMPT_PROCESS=fork is not supported on this platform; spawning a process per attempt")
    return AttemptRunner


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (likely the out-of-memory killer)" if -code == signal.SIGKILL else ""
        return f"the pipeline process was killed by {name}{hint}"
    return f"the pipeline process exited with code {code}"


class AttemptRunner:
    """Runs one claimed attempt (of a job or of a chunk) in a child process and reports how it ended.

    ``spec`` tells the child what to run (see ``shared.runtime.child``); the runner adds
    the paths of the input and result files.
    """

    def __init__(self, lease: Lease, spec: AttemptSpec, timeout: float, settings: Settings) -> None:
        self.lease = lease
        self.spec = spec
        self.timeout = timeout
        self.settings = settings
        self._progress: Progress | None = None
        self._progress_dirty = False
        self._last_write = time.monotonic()
        self._usage: dict[str, float] = {}
        self._storage_ops: dict[str, int] = {}
        self._terminal_event: protocol.Terminal | None = None
        # When the lease was last known to be ours: the self-fencing clock. It starts when the claim was asked
        # for (its heartbeat is planned after that), and each renewal moves it to when that renewal *started*
        # (its heartbeat_at was planned then, not when the answer came back).
        self._renewed_at = getattr(lease, "renewed_at", time.monotonic())
        self._fence_after = FENCE_FRACTION * settings.heartbeat_stale_seconds
        # Renewals run on their own thread, so a renewal that blocks inside the SDK (a read timeout,
        # re-reads after an ambiguous write) cannot keep the loop from enforcing the fence.
        self._renewal: threading.Thread | None = None
        self._renewal_lost: LostClaim | None = None
        self._cancel_wanted = False
        self._cancel_deadline: float | None = None
        self._kill_reason: tuple[ResultKind, JobError | None] | None = None
        self._proc: ChildProcess | None = None
        self._terminal_at: float | None = None
        # The open stage span: stages are traced here, from the progress
        # events, so the pipeline process needs no telemetry of its own.
        self._stage: tuple[str, Span, float] | None = None

    # -- heartbeat writes --------------------------------------------------------
    def _write(self, progress: Progress | None = None) -> bool:
        """Start renewing the lease (with progress) unless a renewal is still in flight; True if one started.

        A cancel request makes the renewal's write fail with 412 and then shows on the re-read row.
        """
        if self._renewal is not None and self._renewal.is_alive():
            return False
        started = time.monotonic()
        self._last_write = started

        def renew() -> None:
            try:
                cancel = self.lease.renew(progress)
                self._renewed_at = max(self._renewed_at, started)
                self._cancel_wanted = self._cancel_wanted or cancel
            except LostClaim as lost:
                self._renewal_lost = lost
            except StorageUnavailable:  # Contended too: it is one
                # The child keeps working and the next heartbeat tries again, until the fence.
                log.warning("heartbeat for %s failed: storage unavailable", self.lease.label)
            except Exception:
                log.exception("heartbeat for %s failed", self.lease.label)

        self._renewal = threading.Thread(target=renew, name=f"renew {self.lease.label}", daemon=True)
        self._renewal.start()
        return True

    def _renewals_settled(self) -> None:
        """Apply what the last renewal learnt: a lost claim ends the attempt, a cancel request asks it to stop."""
        if self._renewal_lost is not None:
            raise self._renewal_lost
        if self._cancel_wanted and self._cancel_deadline is None:
            self._request_cancel()

    def _join_renewal(self) -> None:
        # The outcome write follows: let an in-flight renewal finish first (bounded: it may be stuck).
        if self._renewal is not None:
            self._renewal.join(timeout=_EXIT_GRACE_SECONDS)

    def _request_cancel(self) -> None:
        log.info("%s: cancellation requested, asking the pipeline to stop", self.lease.label)
        self._cancel_deadline = time.monotonic() + self.settings.cancel_grace_seconds
        try:
            assert self._proc is not None and self._proc.stdin is not None
            self._proc.stdin.write(b"cancel\n")
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass

    # -- the attempt -----------------------------------------------------------
    def run(self, input_value: Any) -> AttemptResult:
        with tempfile.TemporaryDirectory(prefix=f"thematiq-{self.spec.job_id}-") as tmp:
            result = self._run_in(Path(tmp), input_value)
        # Whatever the ending (a lost claim too): the host counts what the child did on its meter.
        result.storage_ops = dict(self._storage_ops)
        return result

    def _run_in(self, tmp: Path, input_value: Any) -> AttemptResult:
        input_path, result_path, spec_path = tmp / "input.json", tmp / "result.json", tmp / "spec.json"
        input_path.write_text(json.dumps(input_value, ensure_ascii=False), encoding="utf-8")
        spec = self.spec.model_copy(update={"input_path": str(input_path), "result_path": str(result_path)})
        spec_path.write_text(spec.model_dump_json())
        read_fd, write_fd = os.pipe()
        stderr_path = tmp / "stderr.txt"
        try:
            with open(stderr_path, "wb") as stderr:
                self._proc = self._renewing_while(lambda: self._start(spec_path, write_fd, stderr.fileno()))
        except BaseException:
            os.close(read_fd)
            self._join_renewal()  # a heartbeat the start's keeper began: not left running past the attempt
            raise
        finally:
            os.close(write_fd)
        started = time.monotonic()
        try:
            if started - self._last_write >= self.settings.heartbeat_seconds:
                # Starting took a while (a zygote starting up, a loaded machine): renew the lease now and wait
                # for it, but no longer than the fence allows, so the fence measures the attempt, not its start.
                if self._write() and self._renewal is not None:
                    self._renewal.join(timeout=max(0.0, self._renewed_at + self._fence_after - time.monotonic()))
            self._supervise(read_fd, started)
            self._join_renewal()
            self._renewals_settled()
        except LostClaim as lost:
            self._kill()
            # The pipeline is stopped (the fence holds); a renewal still in flight would otherwise outlive the
            # attempt and land a heartbeat on the abandoned row afterwards (holding off the reaper for another
            # stale period), from a thread the host no longer watches. Bounded: it may be stuck in the SDK.
            self._join_renewal()
            log.warning("%s: lost the claim (%s); attempt abandoned", self.lease.label, lost)
            self._leave_stage("lost")
            return AttemptResult("lost")
        finally:
            os.close(read_fd)
            self._kill()
            if self._proc.stdin is not None:
                self._proc.stdin.close()
        return self._outcome(result_path, stderr_path)

    def _renewing_while(self, start: Callable[[], ChildProcess]) -> ChildProcess:
        """Run ``start`` while heartbeats keep the lease: starting can take seconds (a zygote's first
        imports on a loaded machine) and a claim must not go stale, and fence itself, before its
        attempt even began. Under CI load a 2.4 s zygote start did exactly that."""
        started = threading.Event()

        def beat() -> None:
            while not started.wait(self.settings.heartbeat_seconds):
                self._write()

        keeper = threading.Thread(target=beat, name=f"start {self.lease.label}", daemon=True)
        keeper.start()
        try:
            return start()
        finally:
            started.set()
            keeper.join()

    def _start(self, spec_path: Path, event_fd: int, stderr_fd: int) -> ChildProcess:
        """Start the attempt's process: a fresh interpreter (``spawn``); ``ForkRunner`` forks a warm zygote."""
        return subprocess.Popen(
            [sys.executable, "-m", "shared.runtime.child", str(spec_path), str(event_fd)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=stderr_fd,
            pass_fds=(event_fd,),
            cwd=str(APP_ROOT),
            env=child_env(),
            start_new_session=True,
        )

    def _supervise(self, read_fd: int, started: float) -> None:
        assert self._proc is not None
        sel = selectors.DefaultSelector()
        sel.register(read_fd, selectors.EVENT_READ)
        buffer = b""
        eof = False
        exited_at: float | None = None
        while not eof or self._proc.poll() is None:
            now = time.monotonic()
            if self._terminal_at is not None and now - self._terminal_at > _EXIT_GRACE_SECONDS:
                # The pipeline said how it ended but its process lingers (a non-daemon thread, say):
                # its answer stands, and the process goes.
                break
            if self._proc.poll() is not None:
                exited_at = exited_at or now
                if not eof and now - exited_at > _EXIT_GRACE_SECONDS:
                    break  # exited, but a process it left behind holds the event pipe open
            if not eof:
                for _key, _ in sel.select(timeout=0.25):
                    chunk = os.read(read_fd, 65536)
                    if not chunk:
                        eof = True
                        break
                    buffer += chunk
                    *lines, buffer = buffer.split(b"\n")
                    for line in lines:
                        self._on_event(line)
            else:
                # The event pipe is closed: wait (briefly) for the exit status rather than sleep.
                try:
                    self._proc.wait(0.05)
                except subprocess.TimeoutExpired:
                    pass
            now = time.monotonic()
            self._renewals_settled()
            if self._kill_reason is None and self._terminal_event is None:
                if now - self._renewed_at > self._fence_after:
                    log.error(
                        "%s: lease not renewed for %.0f s; stopping the attempt before the reaper hands it on",
                        self.lease.label, now - self._renewed_at,
                    )
                    self._kill()
                    raise LostClaim("fenced: the lease could not be renewed")
                if now - started > self.timeout:
                    self._kill_reason = (
                        "failed",
                        JobError.of("Timeout", f"the attempt exceeded its {self.timeout:.0f} s timeout"),
                    )
                    self._kill()
                elif self._cancel_deadline is not None and now > self._cancel_deadline:
                    self._kill_reason = ("cancelled", None)
                    log.warning(
                        "%s: pipeline ignored cancellation for %.0f s; killed",
                        self.lease.label,
                        self.settings.cancel_grace_seconds,
                    )
                    self._kill()
            since = now - self._last_write
            if self._progress_dirty and since >= self.settings.progress_min_interval_seconds:
                if self._write(progress=self._progress):
                    self._progress_dirty = False
            elif since >= self.settings.heartbeat_seconds:
                self._write()
        sel.close()
        self._kill()

    def _on_event(self, line: bytes) -> None:
        event = protocol.decode(line)
        if isinstance(event, protocol.ProgressEvent):
            self._progress = Progress(
                stage=event.stage[:200], processed=event.processed, total=event.total, message=event.message[:500]
            )
            self._progress_dirty = True
            self._enter_stage(self._progress.stage)
        elif isinstance(event, protocol.UsageEvent):
            for name, value in event.counters.items():
                self._usage[name] = self._usage.get(name, 0.0) + float(value)
        elif isinstance(event, protocol.MeterEvent):
            for op, n in event.counts.items():
                self._storage_ops[op] = self._storage_ops.get(op, 0) + int(n)
        elif isinstance(event, protocol.LogEvent):
            level = getattr(logging, event.level, logging.INFO)
            log.log(level if isinstance(level, int) else logging.INFO, "%s: %s", self.lease.label, event.message)
        elif isinstance(event, protocol.Done | protocol.Failed | protocol.CancelledEvent | protocol.Suspended):
            self._terminal_event = event
            self._terminal_at = time.monotonic()

    def _kill(self) -> None:
        """SIGKILL the attempt's whole process group, including anything it left running."""
        proc = self._proc
        if proc is None:
            return
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()

    def _enter_stage(self, stage: str) -> None:
        if self._stage is not None and self._stage[0] == stage:
            return
        self._leave_stage("ok")
        if stage:
            span = telemetry.tracer.start_span(f"stage {stage}", attributes={"thematiq.stage": stage})
            self._stage = (stage, span, time.monotonic())
            telemetry.set_stage(stage)

    def _leave_stage(self, status: str) -> None:
        if self._stage is None:
            return
        stage, span, started = self._stage
        self._stage = None
        if status != "ok":
            telemetry.mark_error(span, status)
        span.end()
        duration_ms = round((time.monotonic() - started) * 1000)
        telemetry.event(
            "stage.finished", job_id=self.spec.job_id, stage=stage, duration_ms=duration_ms, status=status
        )

    def _outcome(self, result_path: Path, stderr_path: Path) -> AttemptResult:
        assert self._proc is not None
        usage = dict(self._usage)
        out = self._outcome_kind(result_path, stderr_path, usage)
        out.progress = self._progress
        self._leave_stage({"succeeded": "ok", "suspended": "ok", "cancelled": "cancelled"}.get(out.kind, "error"))
        return out

    def _outcome_kind(self, result_path: Path, stderr_path: Path, usage: dict[str, float]) -> AttemptResult:
        assert self._proc is not None
        if self._kill_reason is not None:
            kind, error = self._kill_reason
            return AttemptResult(kind, error=error, retryable=False, usage=usage)
        event = self._terminal_event
        # The terminal event is written after the result file, so it stands even if the process had
        # to be killed afterwards for lingering.
        if isinstance(event, protocol.Done) and result_path.exists():
            return AttemptResult("succeeded", result=result_path.read_bytes(), usage=usage, binary=event.binary)
        if isinstance(event, protocol.CancelledEvent):
            return AttemptResult("cancelled", usage=usage)
        if isinstance(event, protocol.Suspended):
            return AttemptResult("suspended", usage=usage, suspended=event)
        if isinstance(event, protocol.Failed):
            err = JobError.of(event.type, event.message)
            return AttemptResult("failed", error=err, retryable=event.retryable, usage=usage)
        reason = describe_exit(self._proc.returncode)
        # Only the size of stderr is logged: its last line may quote the data the pipeline was working on.
        size = stderr_path.stat().st_size if stderr_path.exists() else 0
        log.error("%s: %s (%d bytes of stderr not logged)", self.lease.label, reason, size)
        return AttemptResult("failed", error=JobError.of("ProcessDied", reason), retryable=True, usage=usage)


class AttemptHost:
    """What the job worker and the chunk worker share: the injected stores, the lifecycle, the pipelines, how
    an attempt's process is started, the host's memory budget and its transaction meter.

    ``budget`` and ``meter`` come from the platform, which hands the same ones to both workers (job attempts and
    chunks share the host's memory); a host built alone gets its own.
    """

    def __init__(
        self, stores: Stores, registry: Registry | None = None, runner: RunnerFactory | None = None, *,
        budget: MemoryBudget | None = None, meter: TransactionMeter | None = None,
    ) -> None:
        self.stores = stores
        #: Admission: attempts start only while their memory estimates fit (``shared.runtime.admission``).
        self.budget = budget if budget is not None else MemoryBudget()
        #: Where the Storage transactions of this host's attempt processes are counted.
        self.meter = meter if meter is not None else TransactionMeter()
        #: How an attempt is run: a fork of the host's zygote or a fresh interpreter (``ATTEMPT_PROCESS``).
        self.runner = runner or default_runner()
        self.lifecycle = Lifecycle(self.stores)
        self.registry = registry or default_registry()

    def _decode_or_poison(self, text: str, decode: Callable[[str], M], what: str, queue: str | None = None) -> M | None:
        """The message, or None once one that is not a ``what`` message was copied to the poison queue."""
        try:
            return decode(text)
        except BadMessage:
            log.error("dropping a message that is not a %s message; copied to the poison queue", what)
            if queue is None:
                self.stores.messages.send_poison(text)
            else:
                self.stores.messages.send_poison(text, queue)
            return None

    def _attempt(self, lease: Lease, spec: AttemptSpec, timeout: float, settings: Settings, value: Any) -> AttemptResult:
        """Run one claimed attempt on this host's runner; the Storage transactions its process made go on the meter."""
        result = self.runner(lease, spec, timeout, settings).run(value)
        for op, n in result.storage_ops.items():
            self.meter.add(op, n)
        return result

    def _estimate(self, pipeline: Pipeline | None, params: dict[str, Any], value: Any, label: str) -> float:
        """The attempt's declared memory estimate in MiB (``Pipeline.memory_mb`` on its input), or the default."""
        default = self.settings.default_attempt_memory_mb
        if pipeline is None or pipeline.memory_mb is None:
            return default
        try:
            return float(pipeline.memory_mb(pipeline.params_model.model_validate(params), value))
        except Exception:  # noqa: BLE001 - a broken estimate must not block the work
            log.warning("%s: the memory estimate of pipeline %s failed; using the default", label, pipeline.name)
            return default

    @property
    def settings(self) -> Settings:
        from shared.config.settings import get_settings

        return get_settings()

    def _send_later(self, message: JobMessage | ChunkMessage, row: R) -> timedelta:
        """Send ``message`` again after ``ADMISSION_DELAY_SECONDS`` (no memory here now); returns the delay.

        ``row`` (queued, as this delivery leaves it) is made due that much later first, so the reaper's
        lost-message pass does not take a row that only waits for memory for one whose message was lost (and
        add a copy each period). The new message starts with a dequeue count of 0, so waiting for memory never
        pushes work towards the poison queue. Were the send lost, this delivery fails instead and the host
        redelivers it.
        """
        delay = timedelta(seconds=self.settings.admission_delay_seconds)
        postponed = self.lifecycle.postpone(row, delay)
        if isinstance(message, JobMessage) and message.row is not None:
            # A first message carries the row and its ETag so the claim needs no read; the postponement just
            # wrote the row, so the message goes with that write's row and ETag, never with the stale ETag whose
            # claim would be answered 412 and re-read on every later delivery. Only a row that holds its input
            # travels (a postponement decided by re-reading has the row without its inline input): else ids only.
            fresh = postponed.row
            if postponed.applied and isinstance(fresh, Job) and (fresh.input_inline is not None or fresh.input_blob):
                message = first_message(fresh)
            else:
                message = message.without_row()
        if not self.lifecycle.send(message, delay):
            raise StorageUnavailable(f"could not defer the {type(message).__name__}")
        return delay

    @staticmethod
    def _next_step(retry: RetryPolicy, row: Job | Chunk, result: AttemptResult) -> tuple[RetryDecision, bool]:
        """The retry policy's decision on a failed attempt, and whether it is tried again (attempts left)."""
        decision = retry.decide(row.attempts, result.retryable)
        return decision, decision.retry and row.attempts < row.max_attempts

    def _give_back(
        self, claimed: R, before: R, *, last: bool, why: str, stored: StoredResult | None = None,
        traceparent: str | None = None,
    ) -> None:
        """After the worker itself failed holding a claim: release it, or on the last delivery fail the row.

        Not the last delivery, or the result is already stored: the claim goes back (with the result), so a
        redelivery, or the reaper's lost-message pass after the poison queue took the message, finishes the
        work from it instead of failing or re-running it. If Storage is away too, the claim goes stale and the
        reaper takes it.
        """
        try:
            if last and stored is None:
                self.lifecycle.finish(claimed, Ending(Status.FAILED, JobError.of("PoisonMessage", why)))
                if isinstance(claimed, Chunk):
                    self.lifecycle.refill_or_fan_in(claimed.tenant, claimed.job_id, claimed.stage, traceparent)
            else:
                self.lifecycle.release(claimed, before, stored)
        except Exception:
            log.exception("%s: could not release the claim after a worker error", kind_of(claimed).label(claimed))
