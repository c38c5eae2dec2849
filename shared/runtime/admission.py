"""Memory-aware admission: a host never starts an attempt that would push its attempts past its memory budget.

Each pipeline may declare ``Pipeline.memory_mb(params, input)``, an estimate of one
attempt's peak memory (thematic: from the number and length of the texts); others
count ``DEFAULT_ATTEMPT_MEMORY_MB``. The budget of a host process is
``INSTANCE_MEMORY_MB - MEMORY_MARGIN_MB`` (the margin covers the host, the zygote and
estimation error). An attempt is admitted if its estimate fits beside those running,
or if nothing runs (an attempt larger than the whole budget runs alone rather than
never). A message that does not fit is not failed and burns no dequeue: the worker
sends it again, invisible for ``ADMISSION_DELAY_SECONDS``, and completes this delivery
(``shared.runtime.worker``); any host with room takes it then.

One budget per host process, shared by the job worker and the chunk worker: the process's
``shared.platform.Platform`` holds it and hands it to both (``Platform.budget``). The host
runs one Python worker process per instance (``FUNCTIONS_WORKER_PROCESS_COUNT`` 1, the
default), so this is the instance's budget.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from shared.config.settings import get_settings


@dataclass
class Reservation:
    budget: MemoryBudget
    mb: float
    released: bool = False

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.budget._release(self.mb)


class MemoryBudget:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._used = 0.0
        self._running = 0
        #: For tests and the bench: the most attempts and estimated MB that ran at once, and deferrals.
        self.peak_running = 0
        self.peak_mb = 0.0
        self.deferred = 0

    @staticmethod
    def capacity_mb() -> float:
        s = get_settings()
        return max(0.0, s.instance_memory_mb - s.memory_margin_mb)

    def try_reserve(self, mb: float) -> Reservation | None:
        mb = max(0.0, mb)
        with self._lock:
            if self._running and self._used + mb > self.capacity_mb():
                self.deferred += 1
                return None
            self._used += mb
            self._running += 1
            self.peak_running = max(self.peak_running, self._running)
            self.peak_mb = max(self.peak_mb, self._used)
            return Reservation(self, mb)

    def _release(self, mb: float) -> None:
        with self._lock:
            self._used = max(0.0, self._used - mb)
            self._running = max(0, self._running - 1)

    def reset(self) -> None:
        """Nothing running, nothing recorded: as in a fresh process (``shared.platform.reset_process``)."""
        with self._lock:
            self._used, self._running = 0.0, 0
            self.peak_running, self.peak_mb, self.deferred = 0, 0.0, 0

    @property
    def running(self) -> int:
        with self._lock:
            return self._running

