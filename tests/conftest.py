"""Shared fixtures (a real Azurite for the whole session, unique storage names per test) and the test tiers.

The tiers are folders: ``tests/unit`` (the in-memory fake only: no Azurite, no child processes, no sockets, no
browser), ``tests/integration`` (Azurite, child processes, the zygote, the SDKs' real transports) and ``tests/e2e``
(host processes via devhost, the browser, the CLI through a host). Each test gets its tier's marker from its path
(``-m unit`` selects the fast tier); a unit test that reaches for a socket, a child process or Azurite fails.

Set ``THEMATIQ_TEST_STORAGE`` to a connection string to reuse a running Azurite; otherwise a private instance is
started on free ports and removed at the end: one per pytest process, so one per pytest-xdist worker under
``scripts/test`` (a worker's tests never share an Azurite with another worker's, and one node process each spreads
the storage work over the cores).
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import CodeType, FunctionType, ModuleType
from typing import Any

from shared.runtime.blas import ONE_BLAS_THREAD

# In-process pipelines in a test run as an attempt's process does (one BLAS thread: shared/runtime/blas.py), set
# before anything imports numpy; it also keeps 3 xdist workers on 2 cores from spinning each other's BLAS threads.
for _name, _value in ONE_BLAS_THREAD.items():
    os.environ.setdefault(_name, _value)

import pytest  # noqa: E402

from devhost.azurite import Azurite  # noqa: E402
from shared.platform import Platform, reset_process, use  # noqa: E402
from tests.support.fake_llm_server import CONNECTION_THREAD  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent
TIERS = ("unit", "integration", "e2e")

pytest_plugins = ["tests.support.backend_fixture"]


def tier_of(path: Path) -> str | None:
    """The tier folder a test file is in (None for a file outside the tiers)."""
    try:
        first = Path(path).resolve().relative_to(TESTS).parts[0]
    except (ValueError, IndexError):
        return None
    return first if first in TIERS else None


#: Folders whose tests share one session-scoped host (``cli_host``, ``client_host``): under pytest-xdist they run on
#: one worker, so the host starts once, not once per worker that happens to get one of their files.
SHARED_HOST_FOLDERS = ("e2e/cli", "e2e/client")

#: Files that read the built Swagger UI (web/static/build/swagger-ui) and npm's tree under tools/swagger-ui, with the
#: one that rebuilds both in place (the prepackage hook runs ``npm ci`` and ``swagger_assets --fresh``: between its
#: renames the docs page is a 503 and node_modules is half there). One worker runs them in turn, never side by side.
SWAGGER_BUILD_FILES = ("integration/infra/test_prepackage_hook.py", "integration/test_provenance.py",
                       "e2e/ui/test_docs_page.py")


def xdist_group_of(path: Path) -> str:
    """The unit ``scripts/test`` hands to one pytest-xdist worker (``--dist loadgroup``): a test file, because its
    module-scoped fixtures (a host, a fake server) are built once per module, or a whole folder of
    ``SHARED_HOST_FOLDERS``, or all of ``SWAGGER_BUILD_FILES``."""
    try:
        rel = Path(path).resolve().relative_to(TESTS).as_posix()
    except ValueError:
        return str(path)
    if rel in SWAGGER_BUILD_FILES:
        return "swagger-ui-build"
    return next((folder for folder in SHARED_HOST_FOLDERS if rel.startswith(folder + "/")), rel)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's worker reads the xdist_group marks (without loadgroup: unread)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    grouped = config.pluginmanager.hasplugin("xdist")  # the mark is pytest-xdist's (--strict-markers without it)
    for item in items:
        if grouped:
            item.add_marker(pytest.mark.xdist_group(xdist_group_of(item.path)))
        tier = tier_of(item.path)
        if tier is None:
            continue
        item.add_marker(getattr(pytest.mark, tier))
        if tier == "unit":
            reaches = {"azurite", "storage_env"} & set(getattr(item, "fixturenames", ()))
            if reaches:
                raise pytest.UsageError(f"{item.nodeid}: a unit test uses {sorted(reaches)}; move it to tests/integration")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``backend`` by tier: the fake in unit (plus the reaper's sweep where the test runs the reaper), else Azurite."""
    if "backend" not in metafunc.fixturenames:
        return
    if tier_of(metafunc.definition.path) == "unit":
        params = ["fake", "fake-sweep"] if _runs_reaper(metafunc.function, metafunc.module) else ["fake"]
    else:
        params = ["azurite"]
    metafunc.parametrize("backend", params, indirect=True)


def _runs_reaper(function: Callable[..., Any], module: ModuleType) -> bool:
    """Whether the test (or a module-level helper it calls, transitively) calls ``scenarios.reaper``, the one place
    ``Backend.reaper_sweep`` is read: only there do the active-jobs index and the full sweep find rows differently."""
    seen: set[str] = set()

    def names(code: CodeType) -> Iterator[str]:
        yield from code.co_names
        for const in code.co_consts:
            if isinstance(const, CodeType):
                yield from names(const)

    todo = [function]
    while todo:
        fn = todo.pop()
        for name in names(fn.__code__):
            if name == "reaper":
                return True
            value = vars(module).get(name)
            if name not in seen and isinstance(value, FunctionType) and value.__module__ == module.__name__:
                seen.add(name)
                todo.append(value)
    return False


@pytest.fixture(autouse=True)
def _unit_tier_isolation(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """In tests/unit, a network socket or a child process is an error: such a test belongs in tests/integration."""
    if tier_of(request.node.path) != "unit":
        return

    def refuse(what: str) -> Callable[..., Any]:
        def refused(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError(f"a unit test used {what}; move it to tests/integration")
        return refused

    inet = (socket.AF_INET, socket.AF_INET6)
    real_connect, real_bind = socket.socket.connect, socket.socket.bind

    def connect(self: socket.socket, address: Any) -> None:
        if self.family in inet:
            refuse(f"a network socket (connect {address!r})")()
        real_connect(self, address)

    def bind(self: socket.socket, address: Any) -> None:
        if self.family in inet:
            refuse(f"a network socket (bind {address!r})")()
        real_bind(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "bind", bind)
    monkeypatch.setattr(subprocess.Popen, "__init__", refuse("a child process (subprocess)"))
    monkeypatch.setattr(os, "fork", refuse("a child process (fork)"))


#: Threads a test may leave running, by name prefix, and why each is harmless. Anything else a unit or integration
#: test started must have ended by its teardown: a heartbeat, a renewal, a reaper or a host thread that outlives its
#: test makes storage calls during the next one on the same pytest-xdist worker (a fenced attempt's in-flight
#: renewal put table:get + table:merge on the process-wide METER in a later unit test: fresh-clone CI of 811b79b).
LIFETIME_THREADS = {
    # shared.core.webhooks: a DNS lookup's own thread (a hung getaddrinfo cannot be cancelled, so each lookup runs on
    # one under a deadline and is abandoned past it); it only resolves names, and ends when the resolver answers.
    "thematiq-dns_": "a webhook URL's DNS lookup (ends when the resolver answers)",
    # tests/support/fake_llm_server: a connection an LLM client of the test keeps alive to the module's fake LLM
    # server; the thread only serves that socket and ends with the client or the server.
    CONNECTION_THREAD: "a kept-alive connection to the fake LLM server",
}
#: How long the threads a test started get to end after its teardown before they count as leaked: a bound, so a
#: loaded machine's slow thread end is not a failure (an SDK retry backs off for seconds; shared machines have run
#: at load 10-18), and paid only by a test that leaves a thread behind. The join is what stops the leak: a thread
#: that ends within the bound still ends before the next test starts.
THREAD_END_SECONDS = 10.0


def _lifetime(thread: threading.Thread) -> bool:
    return thread.name.startswith(tuple(LIFETIME_THREADS))


@pytest.fixture(autouse=True)
def _no_thread_outlives_its_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """A unit or integration test leaves no thread of its own running (``LIFETIME_THREADS`` aside).

    Autouse, so set up before and torn down after the test's other function-scoped fixtures (a fixture that
    stops a server or a host has done so when this looks); threads of module- and session-scoped fixtures were
    started before it and are not the test's. tests/e2e is left out: its storage work happens in host processes,
    and some of its tests leave client threads on purpose (a request the host is stopped under).
    """
    if tier_of(request.node.path) not in ("unit", "integration"):
        yield
        return
    before = set(threading.enumerate())
    yield
    started = [t for t in threading.enumerate() if t not in before and not _lifetime(t)]
    if not started:
        return
    deadline = time.monotonic() + THREAD_END_SECONDS
    for thread in started:
        thread.join(max(0.0, deadline - time.monotonic()))
    alive = [t for t in started if t.is_alive()]
    if alive:
        names = ", ".join(f"{t.name!r} ({'daemon' if t.daemon else 'non-daemon'})" for t in alive)
        pytest.fail(f"the test left threads running {THREAD_END_SECONDS:.0f} s after its teardown: {names}; stop and "
                    "join them where they are started (or, for a process-lifetime thread, see LIFETIME_THREADS)",
                    pytrace=False)


@pytest.fixture(scope="session")
def azurite() -> Iterator[str]:
    """Connection string of a running Azurite."""
    existing = os.environ.get("THEMATIQ_TEST_STORAGE")
    if existing:
        yield existing
        return
    az = Azurite.private().start()
    try:
        yield az.connection_string
    finally:
        az.close()


def unique_names() -> dict[str, str]:
    """Settings of a deployment of its own: storage names no other test uses, and a host id.

    Tests share one Azurite, the way several function apps can share one storage
    account. Each needs its own host id too: timer triggers are singletons per
    host id (a blob lease), so hosts of another test's "app" that are still
    running would otherwise hold the reaper's lock for the whole session. The
    callbacks queue too: a session-scoped host (``cli_host``) polls its queue
    until the session ends, and on the default name it took the webhook
    messages of tests that pytest-xdist ran after it on the same worker.
    """
    suffix = secrets.token_hex(4)
    return {
        "AzureFunctionsWebHost__hostid": f"thematiq-{suffix}",
        "JOBS_TABLE": f"jobs{suffix}",
        "JOBS_QUEUE": f"jobs-{suffix}",
        "CHUNKS_QUEUE": f"chunks-{suffix}",
        "CALLBACKS_QUEUE": f"callbacks-{suffix}",
        "RESULTS_CONTAINER": f"results-{suffix}",
    }


@pytest.fixture
def storage_env(azurite: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """Point this process's settings at Azurite with fresh names; yields the env that was set."""
    env = {"AzureWebJobsStorage": azurite, "DEFAULT_TENANT": "local", **unique_names()}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    reset_process()  # the app's platform is built again, from these settings, on first use
    yield env
    reset_process()


#: A connection string whose every endpoint is a closed port: nothing may reach a real account from the fast tier.
NO_ACCOUNT = (
    "DefaultEndpointsProtocol=http;AccountName=none;AccountKey=bm9uZQ==;TableEndpoint=http://127.0.0.1:9/none;"
    "QueueEndpoint=http://127.0.0.1:9/none;BlobEndpoint=http://127.0.0.1:9/none"
)


@pytest.fixture
def platform(monkeypatch: pytest.MonkeyPatch) -> Iterator[Platform]:
    """A fresh platform on the in-memory fake, installed as the app's: the one fixture a fast test needs.

    Every process-wide default starts as in a fresh process (``shared.platform.reset_process``) and is reset
    again afterwards, so no test leaks a clock, a meter count, a budget or an LLM scope into the next.
    """
    for k, v in {"AzureWebJobsStorage": NO_ACCOUNT, "DEFAULT_TENANT": "local", **unique_names()}.items():
        monkeypatch.setenv(k, v)
    reset_process()
    p = Platform.in_memory()
    use(p)
    yield p
    reset_process()
