"""The composition root: one :class:`Platform` wires the app, built once per process from the settings.

It holds what every trigger needs (the stores, the pipelines, how an attempt runs, the clock, the
transaction meter and the memory budget) and builds the services on them, each once: the jobs API
(:attr:`Platform.service`), the webhook secrets, the job and chunk workers, the webhook sender, and a reaper per
timer run. A blueprint asks :func:`current` for what it needs; nothing below this module builds a store
(import-linter: only ``shared.platform`` and the attempt process's entry import ``shared.storage.assembly``).

Production: ``Platform.from_settings()`` (Azure Storage, an attempt per child process). A test:
``Platform.in_memory()`` (the in-memory fake, attempts in the caller's thread, the fake's clock), then
``use(platform)`` so the app's functions run on it. ``ctx.map()``, checkpoints and fan-in then run on the fake.

The memory budget and the meter are the platform's fields, handed to its workers as constructor arguments (and,
in memory, the meter to the fake's clients its stores use, so each platform counts its own requests).
Some state must stay process-wide because code far below reads it as a module default (the clock
``shared.core.jobs.utcnow``, ``METER`` in every storage client's response hook, the LLM allowance and cache scope
an attempt's process sets, the settings and client caches). :meth:`Platform.install` is the one place that sets
the clock, and :func:`reset_process` the one place that resets all of them (its docstring says why each stays).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, TypeVar, cast

from shared.api import views
from shared.api.pages import PageCache
from shared.api.service import JobService
from shared.api.webhook_secrets import WebhookSecrets
from shared.config import hostconfig
from shared.config import settings as _settings
from shared.core import jobs as _jobs
from shared.core.ports import Stores
from shared.core.registry import Registry, default_registry
from shared.observability.metering import METER, TransactionMeter
from shared.runtime.admission import MemoryBudget
from shared.runtime.chunk_worker import ChunkWorker
from shared.runtime.reaper import Reaper
from shared.runtime.runner import RunnerFactory
from shared.runtime.webhooks import WebhookSender
from shared.runtime.worker import Worker
from shared.storage.assembly import azure_stores, memory_stores

if TYPE_CHECKING:
    from shared.storage.fake import FakeStorage

_T = TypeVar("_T")

#: The API's route prefix: webhook bodies carry the links ``GET /api/jobs/{id}`` answers with.
API = "/api"


@dataclass(eq=False)
class Platform:
    """Everything one process of the app runs on, and the services built on it (each built on first use)."""

    stores: Stores
    registry: Registry
    #: How an attempt runs: in this thread (in memory), or None: the child process ``ATTEMPT_PROCESS`` selects,
    #: chosen when a worker is first built (so an instance that serves only HTTP never starts a zygote).
    runner: RunnerFactory | None = None
    #: The platform's UTC clock; None is the real one. Set process-wide by :meth:`install` (``utcnow``).
    clock: Callable[[], datetime] | None = None
    #: The Storage transaction count: the platform's stores count their requests on it, and the workers add
    #: their attempt processes' counts. In memory, one of its own, handed to the fake's clients
    #: (``memory_stores(fake, meter)``). On Azure Storage it is ``METER``, and must be: the SDK clients are
    #: cached per process (``shared.storage.connections``: one connection pool per account, each resource
    #: created once), so their response hook is bound to one meter per process, and ``storage_call`` asks that
    #: same meter whether any try of a failed call was answered. :meth:`from_settings` passes it explicitly.
    meter: TransactionMeter = METER
    #: This host's memory budget for running attempts (``shared.runtime.admission``): one per platform, shared
    #: by its job and chunk workers.
    budget: MemoryBudget = field(default_factory=MemoryBudget)
    #: The in-memory account behind ``stores``, for a test to look into (None on Azure Storage).
    fake: FakeStorage | None = None
    _built: dict[str, object] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def from_settings(cls, registry: Registry | None = None) -> Platform:
        """The production platform: Azure Storage (or Azurite) named by the settings, attempts in child processes."""
        # METER: the meter the process's cached Azure clients' response hook feeds (see the ``meter`` field).
        return cls(stores=azure_stores(), registry=registry or default_registry(), meter=METER)

    @classmethod
    def in_memory(cls, fake: FakeStorage | None = None, registry: Registry | None = None) -> Platform:
        """A platform on the in-memory fake (named by the settings as they are now), attempts in the caller's
        thread, time from the fake's clock (move it with ``platform.fake.clock.advance``), and a registry of its
        own (the declared pipelines), so a test that registers one does not leak it into the next."""
        from shared.runtime.inprocess import in_process
        from shared.storage.fake import FakeStorage

        fake = fake or FakeStorage()
        meter = TransactionMeter()  # this platform's requests to the fake are counted on it, and only on it
        stores = memory_stores(fake, meter)
        return cls(stores, registry or Registry(), runner=in_process(stores), clock=fake.clock.now,
                   meter=meter, fake=fake)

    def install(self) -> Platform:
        """Make this platform's clock the process's (``shared.core.jobs.utcnow``); returns the platform."""
        _jobs.set_clock(self.clock)
        return self

    # -- the services, built once per platform ------------------------------------------------------
    def _once(self, name: str, make: Callable[[], _T]) -> _T:
        # Under the lock: the first invocations of a function arrive on several of the host's threads at once,
        # and a worker built twice would pick its attempt runner twice.
        with self._lock:
            built = self._built.get(name)
            if built is None:
                built = self._built[name] = make()
            return cast(_T, built)

    @property
    def service(self) -> JobService:
        return self._once("service", lambda: JobService(self.stores, self.registry))

    @property
    def webhook_secrets(self) -> WebhookSecrets:
        return self._once("webhook_secrets", lambda: WebhookSecrets(self.stores))

    @property
    def worker(self) -> Worker:
        return self._once("worker", lambda: self._warmed(lambda: Worker(
            self.stores, self.registry, runner=self.runner, budget=self.budget, meter=self.meter)))

    @property
    def chunk_worker(self) -> ChunkWorker:
        return self._once("chunk_worker", lambda: self._warmed(lambda: ChunkWorker(
            self.stores, self.registry, runner=self.runner, budget=self.budget, meter=self.meter)))

    def _warmed(self, make: Callable[[], _T]) -> _T:
        # The first queue invocation builds its worker: the zygote starts then, not at import.
        self.warm_attempts()
        return make()

    @property
    def webhook_sender(self) -> WebhookSender:
        # The receiver gets exactly the JSON GET /api/jobs/{id} answers.
        return self._once("webhook_sender", lambda: WebhookSender(self.stores, public=lambda job: views.public(job, API)))

    def warm_attempts(self) -> None:
        """Start what attempts run on (the fork zygote) in the background, if attempts fork; until it is ready,
        an attempt runs in a fresh interpreter instead of waiting (``shared.runtime.prefork.SPAWN_WHILE_WARMING``).

        Called when the job or chunk worker is first built, i.e. at this instance's first queue invocation: an
        instance that only serves HTTP (Flex Consumption scales HTTP functions apart) never starts a zygote
        (with numpy and the pipelines: 78 MiB RSS here). Until review44p's follow-up ``blueprints/worker.py`` started it
        at import, in every worker process."""
        if self.runner is not None:
            return  # attempts run in this process: nothing to start
        from shared.config.settings import get_settings
        from shared.runtime.prefork import fork_supported, prewarm

        if get_settings().attempt_process == "fork" and fork_supported():
            prewarm(spawn_meanwhile=True)

    def reaper(self, *, sweep: bool | None = None) -> Reaper:
        """A reaper for one timer run (it reads the settings when built, as a new run should)."""
        return Reaper(self.stores, sweep=sweep)

    def page(self, key: str, make: Callable[[], PageCache]) -> PageCache:
        """The built page ``key`` of this process (the dashboard, the API reference), made on first use."""
        return self._once(f"page:{key}", make)


_current: Platform | None = None
_current_lock = threading.Lock()


def current() -> Platform:
    """This process's platform: the one :func:`use` installed, else one built from the settings on first use."""
    global _current
    with _current_lock:
        if _current is None:
            _current = Platform.from_settings().install()
        return _current


def use(platform: Platform | None) -> None:
    """Run the app on ``platform`` from now on (installed); None: build from the settings again on next use."""
    global _current
    with _current_lock:
        _current = platform.install() if platform is not None else None


def reset_process() -> None:
    """Reset every process-wide default the platform owns, as a fresh process has them.

    The memory budget and (in memory) the meter are a platform's own fields, handed to its workers, so a new
    platform starts them at zero and nothing here resets them. What is reset must stay process-wide, each for
    a reason:

    * no platform: :func:`current` is how a blueprint finds the one the host built (the next use builds one);
    * the clock (``shared.core.jobs.utcnow``): the job and chunk model read it as a default far below any
      constructor (a row's timestamps, staleness), and the in-memory platform's clock is the fake's;
    * ``METER`` at zero: the storage clients are cached per process (``shared.storage.connections``) with its
      response hook, and ``storage_call`` asks it (per thread) whether any try of a failed call was answered;
      a platform on Azure Storage shares those clients, so its meter is this one;
    * no LLM allowance or cache scope (``shared.llm.reset_job_scope``): the attempt's process sets them, and a
      platform cannot be handed across a fork or an exec;
    * the settings, host.json (with its ``AzureFunctionsJobHost__`` overrides) and storage-client caches: read
      once from the environment, which a test changed.

    The zygote is not touched: it belongs to the fork runner of the host process and restarts itself.
    """
    from shared.llm import reset_job_scope
    from shared.storage import connections

    use(None)
    _jobs.set_clock(None)
    METER.reset()
    reset_job_scope()
    _settings.get_settings.cache_clear()
    hostconfig.host_config.cache_clear()
    connections.reset_clients()


__all__ = ["API", "Platform", "current", "reset_process", "use"]
