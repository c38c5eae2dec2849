"""The timer trigger: NCRONTAB (or TimeSpan) schedules, runOnStartup, useMonitor and past_due.

As in the Functions host (TimerListener, StorageScheduleMonitor, singleton
listener locks):

* a timer runs on ONE host at a time: each host tries to take a blob lease on
  ``azure-webjobs-hosts/locks/<hostId>/Host.Functions.<name>.Listener``; the
  holder renews it every half ``singleton.listenerLockPeriod`` (15-60 s, default
  60 s) and the others retry every ``singleton.listenerLockRecoveryPollingInterval``
  (default 60 s). So runOnStartup and schedules fire once, not once per host;
* with ``useMonitor`` (default true, except for schedules that recur more often
  than once a minute) the schedule status ``{"Last","Next","LastUpdated"}`` is kept
  in ``azure-webjobs-hosts/timers/<hostId>/Host.Functions.<name>/status``. When a
  host takes the lock and ``Next`` has already passed, the function runs at once
  with ``past_due=True`` (a missed occurrence, e.g. the host was down);
* otherwise ``runOnStartup`` runs it once when the listener starts;
* invocations never overlap: the next occurrence is computed after a run ends;
* times are UTC (the host's default without WEBSITE_TIME_ZONE).

Storage outages never stop a timer (the lock manager and the schedule monitor
of the host retry too): a failed status write is a warning and the schedule
goes on; a failed lease renewal is retried until the lease would have expired,
and only then is the lock given up; a lost lock, or any other storage error,
sends the listener back to taking the lock (with the same lease id, so a lease
that is still ours is taken back at once), and a missed occurrence then runs as
past due. runOnStartup runs once per host process, not again after that.

``hostId`` is ``AzureFunctionsWebHost__hostid`` or the app folder name
(:attr:`devhost.config.HostConfig.host_id`). Without a storage connection the
timer runs unlocked and unmonitored, with a warning.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from azure.core.exceptions import HttpResponseError, ResourceExistsError, ResourceNotFoundError
from azure.storage.blob import BlobClient, BlobLeaseClient, BlobServiceClient, ContainerClient, ExponentialRetry

from devhost import config, convert, invoker, storage
from devhost.config import HostConfig, parse_timespan
from devhost.functions import FunctionSpec
from devhost.ncrontab import CrontabSchedule

log = logging.getLogger("devhost")

HOSTS_CONTAINER = "azure-webjobs-hosts"
# The timer's storage calls fail within seconds: the listener retries on its own
# terms, and a lease renewal stuck in the SDK's default backoff (15, 18, 24 s)
# would outlive the lease it is renewing.
_CONNECT_TIMEOUT, _READ_TIMEOUT = 3, 10
# How soon a failed lease renewal is retried, and how long before the lease's
# expiry it is given up (requests in flight and clock rates differ).
RENEW_RETRY_SECONDS = 1.0
RENEW_MARGIN_SECONDS = 2.0
# Pause after a storage error in the schedule loop, before taking the lock again.
ERROR_RETRY_SECONDS = 1.0


class Schedule(Protocol):
    def next(self, after: datetime) -> datetime: ...


@dataclass(frozen=True)
class IntervalSchedule:
    """A TimeSpan schedule ("hh:mm:ss"): every interval since the previous run."""

    interval: timedelta

    def next(self, after: datetime) -> datetime:
        return after + self.interval


def parse_schedule(text: str) -> Schedule:
    """NCRONTAB if it has spaces, else a TimeSpan, like the host's TimerSchedule.Create."""
    if " " in text.strip():
        return CrontabSchedule.parse(text)
    return IntervalSchedule(timedelta(seconds=parse_timespan(text, 0.0)))


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _iso(t: datetime | None) -> str | None:
    return t.isoformat() if t else None


def _parse(t: Any) -> datetime | None:
    if not t:
        return None
    parsed = datetime.fromisoformat(str(t))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _hosts_container() -> ContainerClient:
    """``azure-webjobs-hosts`` with fail-fast retries (KeyError without AzureWebJobsStorage)."""
    service = BlobServiceClient.from_connection_string(
        storage.connection_string(None),
        retry_policy=ExponentialRetry(initial_backoff=1, increment_base=1, retry_total=2, random_jitter_range=1),
        connection_timeout=_CONNECT_TIMEOUT,
        read_timeout=_READ_TIMEOUT,
    )
    return service.get_container_client(HOSTS_CONTAINER)


def _lease_lost(exc: Exception) -> bool:
    """A definitive answer that the lease is not ours (vs. storage being unreachable or failing)."""
    return isinstance(exc, HttpResponseError) and exc.status_code in (404, 409, 412)


def _reason(exc: Exception) -> object:
    return getattr(exc, "error_code", None) or exc


def default_use_monitor(schedule: Schedule) -> bool:
    """The host turns monitoring off by default for schedules that recur in under a minute."""
    first = schedule.next(datetime(2001, 1, 1, tzinfo=UTC))
    return (schedule.next(first) - first) >= timedelta(minutes=1)


class _Lock:
    """The singleton listener lock: a renewed blob lease.

    ``lease_id`` is fixed per listener, so a host that gave up a lease it could
    not renew (storage unreachable) takes it back at once if it is still its own.
    """

    def __init__(self, blob: BlobClient, period: float, lease_id: str) -> None:
        self._blob = blob
        self._period = int(period)
        self._lease_id = lease_id
        self._lease: BlobLeaseClient | None = None
        self.lost = threading.Event()
        self._stop = threading.Event()

    def try_acquire(self) -> bool:
        try:
            self._blob.upload_blob(b"", overwrite=False)
        except (ResourceExistsError, HttpResponseError):
            pass  # Exists already (possibly leased): fine.
        requested = time.monotonic()
        try:
            self._lease = self._blob.acquire_lease(lease_duration=self._period, lease_id=self._lease_id)
        except HttpResponseError as exc:
            if exc.status_code == 409:
                return False
            raise
        threading.Thread(target=self._renew, args=(requested,), name="devhost-lease", daemon=True).start()
        return True

    def _renew(self, renewed: float) -> None:
        """Renew every half period; on errors retry every second until the lease may have
        expired (``renewed``: when the last successful request was sent), then give it up."""
        failures = 0
        wait = self._period / 2
        while not self._stop.wait(wait):
            sent = time.monotonic()
            try:
                assert self._lease is not None
                self._lease.renew()
            except Exception as exc:  # noqa: BLE001 - any failure: decide below, never die silently.
                failures += 1
                expiring = time.monotonic() + RENEW_RETRY_SECONDS >= renewed + self._period - RENEW_MARGIN_SECONDS
                if _lease_lost(exc) or expiring:
                    why = "the lease is no longer ours" if _lease_lost(exc) else "the lease may have expired"
                    log.warning("lost listener lock %s (%s): %s", self._blob.blob_name, why, _reason(exc))
                    self.lost.set()
                    return
                if failures == 1:
                    log.warning("could not renew listener lock %s, retrying: %s", self._blob.blob_name, _reason(exc))
                wait = RENEW_RETRY_SECONDS
                continue
            if failures:
                log.warning("renewed listener lock %s after %d failed attempts", self._blob.blob_name, failures)
            failures, renewed, wait = 0, sent, self._period / 2

    def release(self) -> None:
        self._stop.set()
        if self._lease is not None and not self.lost.is_set():
            try:
                self._lease.release()
            except Exception as exc:  # noqa: BLE001 - storage down: the lease just expires.
                log.debug("could not release listener lock %s: %s", self._blob.blob_name, _reason(exc))


class TimerListener:
    """Runs one timer-triggered function on its schedule while this host holds its lock."""

    def __init__(self, spec: FunctionSpec, cfg: HostConfig, stopping: threading.Event) -> None:
        self.spec = spec
        self.cfg = cfg
        self.stopping = stopping
        self.schedule_text = config.resolve(str(spec.trigger["schedule"]))
        self.schedule = parse_schedule(self.schedule_text)
        self.run_on_startup = bool(spec.trigger.get("runOnStartup", False))
        use_monitor = spec.trigger.get("useMonitor")
        self.use_monitor = default_use_monitor(self.schedule) if use_monitor is None else bool(use_monitor)
        self.timer_name = f"Host.Functions.{spec.name}"
        self._container: ContainerClient | None = None
        self._container_created = False
        self._lease_id = str(uuid.uuid4())
        self._started = False  # runOnStartup done (once per host process)
        self._thread = threading.Thread(target=self._run, name=f"devhost-timer-{spec.name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    # -- storage -----------------------------------------------------------------------

    def _status_blob(self) -> BlobClient:
        assert self._container is not None
        return self._container.get_blob_client(f"timers/{self.cfg.host_id}/{self.timer_name}/status")

    def read_status(self) -> dict[str, Any] | None:
        try:
            return dict(json.loads(self._status_blob().download_blob().readall()))
        except ResourceNotFoundError:
            return None

    def write_status(self, last: datetime | None, next_: datetime) -> dict[str, Any]:
        """Record the schedule status; a storage failure is a warning (the schedule goes on
        with the status in memory; a later write or a past-due run catches up)."""
        status = {"Last": _iso(last), "Next": _iso(next_), "LastUpdated": _iso(_utcnow())}
        try:
            self._status_blob().upload_blob(json.dumps(status).encode(), overwrite=True)
        except Exception as exc:  # noqa: BLE001 - storage down must not stop the timer.
            log.warning("timer %s: could not write its schedule status: %s", self.spec.name, _reason(exc))
        return status

    # -- scheduling --------------------------------------------------------------------

    def _acquire_lock(self) -> _Lock | None:
        """Block until this host holds the listener lock (None: no storage configured, or stopping)."""
        if self._container is None:
            try:
                self._container = _hosts_container()
            except KeyError:
                log.warning("timer %s: no AzureWebJobsStorage, running without lock or monitor", self.spec.name)
                return None
        blob = self._container.get_blob_client(f"locks/{self.cfg.host_id}/{self.timer_name}.Listener")
        while not self.stopping.is_set():
            try:
                if not self._container_created:
                    try:
                        self._container.create_container()
                    except ResourceExistsError:
                        pass
                    self._container_created = True
                lock = _Lock(blob, self.cfg.singleton.listener_lock_period, self._lease_id)
                if lock.try_acquire():
                    return lock
            except Exception as exc:  # noqa: BLE001 - storage down: keep trying, like the host's lock manager.
                log.warning("timer %s: could not take listener lock: %s", self.spec.name, _reason(exc))
            self.stopping.wait(self.cfg.singleton.listener_lock_recovery_polling_interval)
        return None

    def _invoke(self, past_due: bool, status: dict[str, Any] | None) -> None:
        with invoker.ACTIVITY.track():
            invoker.invoke(self.spec, convert.timer_info(past_due, status), reason=f"Timer fired at {_utcnow().isoformat()}")

    def _run(self) -> None:
        """Take the lock and run the schedule until stopping; after a lost lock or a storage
        error, take the lock again. Never ends before the host stops."""
        while not self.stopping.is_set():
            lock: _Lock | None = None
            try:
                lock = self._acquire_lock()
                if self.stopping.is_set():
                    break
                self._schedule_loop(lock)
                if lock is not None and lock.lost.is_set() and not self.stopping.is_set():
                    log.warning("timer %s: listener lock lost, taking it again", self.spec.name)
                    continue
            except Exception as exc:  # noqa: BLE001 - e.g. storage down while reading the status.
                log.warning("timer %s: storage error, taking the lock again: %s", self.spec.name, _reason(exc))
                self.stopping.wait(ERROR_RETRY_SECONDS)
            finally:
                if lock is not None:
                    lock.release()

    def _schedule_loop(self, lock: _Lock | None) -> None:
        monitored = self.use_monitor and self._container is not None
        status = self.read_status() if monitored else None
        now = _utcnow()
        if status is not None:
            recorded_next = _parse(status.get("Next"))
            last_updated = _parse(status.get("LastUpdated"))
            # If the schedule changed since the status was written, judge by the new one.
            if last_updated is not None and recorded_next is not None:
                recomputed = self.schedule.next(last_updated)
                if recomputed != recorded_next and not isinstance(self.schedule, IntervalSchedule):
                    recorded_next = recomputed
            if recorded_next is not None and now > recorded_next:
                log.info("timer %s is past due (missed %s)", self.spec.name, recorded_next.isoformat())
                self._invoke(True, status)
                status = self.write_status(now, self.schedule.next(_utcnow()))
            elif self.run_on_startup and not self._started:
                self._invoke(False, status)
        elif self.run_on_startup and not self._started:
            self._invoke(False, None)
        self._started = True
        last = _utcnow()
        nxt = self.schedule.next(last)
        if monitored and (status is None or _parse(status.get("Next")) != nxt):
            status = self.write_status(_parse(status.get("Last")) if status else None, nxt)
        while not self.stopping.is_set():
            # Short waits, so a lost lock or a stop is noticed promptly.
            while (remaining := (nxt - _utcnow()).total_seconds()) > 0:
                if self.stopping.wait(min(remaining, 0.5)) or (lock and lock.lost.is_set()):
                    return
            if lock and lock.lost.is_set():
                return
            self._invoke(False, status)
            # Never fire the same occurrence twice, even if the clock read early.
            upcoming = self.schedule.next(max(_utcnow(), nxt))
            if monitored:
                status = self.write_status(nxt, upcoming)
            nxt = upcoming
