"""Timers, discovery of new functions and graceful shutdown, with apps generated in tmp dirs."""

from __future__ import annotations

import json
import secrets
import signal
import socket
import threading
import time
import urllib.error
import urllib.request
from datetime import datetime
from pathlib import Path

import pytest
from azure.storage.blob import ContainerClient

from devhost.process import HostProcess
from tests.support.devhost_helpers import read_records, wait_for

HOST_JSON = {
    "version": "2.0",
    "extensions": {"queues": {"maxPollingInterval": "00:00:00.5"}},
    "singleton": {"listenerLockPeriod": "00:00:15", "listenerLockRecoveryPollingInterval": "00:00:01"},
}

PRELUDE = '''
import json, os, time
import azure.functions as func

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)

def record(**fields):
    with open(os.environ["RECORD_FILE"], "a") as f:
        f.write(json.dumps({"pid": os.getpid(), "t": time.time(), **fields}) + "\\n")
'''


def make_app(tmp: Path, body: str, settings: dict[str, str] | None = None) -> Path:
    app = tmp / f"app{secrets.token_hex(3)}"
    app.mkdir()
    (app / "host.json").write_text(json.dumps(HOST_JSON))
    (app / "local.settings.json").write_text(json.dumps({"Values": settings or {}}))
    (app / "function_app.py").write_text(PRELUDE + body)
    return app


@pytest.fixture
def env(azurite: str, tmp_path: Path) -> dict[str, str]:
    return {
        "AzureWebJobsStorage": azurite,
        "RECORD_FILE": str(tmp_path / "records.jsonl"),
        "AzureFunctionsWebHost__hostid": f"t{secrets.token_hex(6)}",
    }


TIMER_APP = '''
@app.timer_trigger(arg_name="t", schedule="%TICK%", run_on_startup=RUN_ON_STARTUP, use_monitor=True)
def tick(t: func.TimerRequest) -> None:
    record(fn="tick", past_due=t.past_due)
'''


def timer_app(tmp: Path, run_on_startup: bool) -> Path:
    return make_app(tmp, TIMER_APP.replace("RUN_ON_STARTUP", str(run_on_startup)))


def test_run_on_startup_once_across_two_hosts(tmp_path: Path, env: dict[str, str]) -> None:
    app = timer_app(tmp_path, run_on_startup=True)
    env["TICK"] = "0 0 0 1 1 *"  # yearly: only runOnStartup can fire it
    hosts = [HostProcess(app, env=env, args=["--no-http"]) for _ in range(2)]
    try:
        for h in hosts:
            h.start()
        recs = wait_for(lambda: read_records(Path(env["RECORD_FILE"])), timeout=30)
        time.sleep(2.5)  # the other host polls the lock every second: it must not run it too
        recs = read_records(Path(env["RECORD_FILE"]))
        assert len(recs) == 1 and recs[0]["past_due"] is False
    finally:
        for h in hosts:
            h.stop()


def test_schedule_fires_and_past_due_after_downtime(tmp_path: Path, env: dict[str, str]) -> None:
    app = timer_app(tmp_path, run_on_startup=False)
    env["TICK"] = "*/2 * * * * *"
    record = Path(env["RECORD_FILE"])
    with HostProcess(app, env=env, args=["--no-http"]):
        wait_for(lambda: len(read_records(record)) >= 2, timeout=30)
    fired = read_records(record)
    assert all(r["past_due"] is False for r in fired)
    # On even seconds: the occurrences as the schedule status records them (the last one run and the next), not
    # the run's clock, which a loaded machine can put half a second or more after its occurrence.
    status = json.loads(ContainerClient.from_connection_string(env["AzureWebJobsStorage"], "azure-webjobs-hosts")
                        .get_blob_client(f"timers/{env['AzureFunctionsWebHost__hostid']}/Host.Functions.tick/status")
                        .download_blob().readall())
    last, upcoming = (datetime.fromisoformat(status[k]).timestamp() for k in ("Last", "Next"))
    assert last % 2 == 0 and upcoming - last == 2, status
    assert max(r["t"] for r in fired) >= last, (status, fired)
    time.sleep(3)  # the host is down over at least one occurrence
    with HostProcess(app, env=env, args=["--no-http"]):
        wait_for(lambda: len(read_records(record)) > len(fired), timeout=30)
    after = read_records(record)[len(fired)]
    assert after["past_due"] is True  # useMonitor status in azure-webjobs-hosts said it was missed


def test_new_function_discovered_and_settings(tmp_path: Path, env: dict[str, str]) -> None:
    body = '''
@app.route(route="added/{name}", methods=["GET"])
def added_later(req: func.HttpRequest) -> str:
    return "hi " + req.route_params["name"] + " " + os.environ["FROM_FILE"]
'''
    app = make_app(tmp_path, body, {"FROM_FILE": "file-value"})
    with HostProcess(app, env=env) as host:
        assert urllib.request.urlopen(host.url + "/api/added/x", timeout=30).read() == b"hi x file-value"
        assert "added_later: [GET]" in host.logs


def test_graceful_sigterm_lets_running_invocation_finish(tmp_path: Path, env: dict[str, str]) -> None:
    body = '''
@app.route(route="slow")
def slow(req: func.HttpRequest) -> str:
    record(phase="start")
    time.sleep(2)  # the running invocation the shutdown must let finish
    return "finished"
'''
    host = HostProcess(make_app(tmp_path, body), env=env).start()
    record = Path(env["RECORD_FILE"])
    result: dict[str, object] = {}

    def request() -> None:
        result["body"] = urllib.request.urlopen(host.url + "/api/slow", timeout=60).read()

    t = threading.Thread(target=request)
    t.start()
    try:
        wait_for(lambda: read_records(record), what="the invocation's start")
        host.signal(signal.SIGTERM)
        # No new requests once stopping: wait until a new connection is refused, not for a guessed 0.3 s. The bound
        # only stops a hang: 5 s ran out in a parallel full suite at load 30, beside two busy loops.
        wait_for(lambda: _refused(host.url + "/api/nothing-here"), timeout=60, what="new requests to be refused")
        t.join(60)
        assert result.get("body") == b"finished"
        assert host.wait(60) == 0
        assert "devhost stopped" in host.logs
    finally:
        # A host left running on failure was collected later, in another test, as an unraisable ResourceWarning
        # ("subprocess … is still running"), which warnings-as-errors failed too (test_labels.py after this one).
        host.stop()


def test_grace_expiry_and_second_signal(tmp_path: Path, env: dict[str, str]) -> None:
    body = '''
@app.route(route="forever")
def forever(req: func.HttpRequest) -> str:
    record(phase="start")
    time.sleep(30)  # an invocation that outlives the grace period
    return "never"
'''
    app = make_app(tmp_path, body)
    record = Path(env["RECORD_FILE"])
    for second_signal in (False, True):
        host = HostProcess(app, env=env, grace=1 if not second_signal else 30).start()
        started = len(read_records(record))
        threading.Thread(target=lambda h=host: _ignore(h.url + "/api/forever"), daemon=True).start()
        wait_for(lambda n=started: len(read_records(record)) > n, what="the invocation's start")
        start = time.monotonic()
        host.signal(signal.SIGTERM)
        if second_signal:
            # The second signal must come after the first one was handled, so wait for the host to say so.
            wait_for(lambda h=host: "SIGTERM received: stopping" in h.logs, timeout=60, what="the first signal")
            host.signal(signal.SIGINT)
        code = host.wait(20)
        # Well before the 30 s invocation (grace 1 s) or the 30 s grace (second signal) could end; generous for a
        # loaded machine, where the host's exit itself takes seconds.
        assert time.monotonic() - start < 15
        assert code != 0


def _refused(url: str) -> bool:
    """True once the host no longer accepts a request (any answer, even a 404, means it still does)."""
    try:
        urllib.request.urlopen(url, timeout=2).close()
    except urllib.error.HTTPError as answered:
        answered.close()
        return False
    except OSError:
        return True
    return False


def _ignore(url: str) -> None:
    try:
        urllib.request.urlopen(url, timeout=40).read()
    except OSError:
        pass


HELLO = '''
@app.route(route="hello")
def hello(req: func.HttpRequest) -> str:
    return "hi"
'''


def test_a_port_another_process_holds_is_a_clear_exit_not_a_hang(tmp_path: Path, env: dict[str, str]) -> None:
    # The host used to raise out of main() with its language worker still running, and the process stayed up
    # without HTTP until the caller gave up ("devhost not ready after 30s" in a parallel CI run).
    app = make_app(tmp_path, HELLO)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        host = HostProcess(app, env=env, port=taken.getsockname()[1])
        try:
            with pytest.raises(RuntimeError, match="exited with 4"):
                host.start(timeout=120)  # the bound only stops a hang; the host exits as soon as it has indexed
            assert "cannot listen on 127.0.0.1" in host.logs
            assert "Traceback" not in host.logs
        finally:
            host.stop()


def test_a_host_given_no_port_binds_one_itself_and_names_it(tmp_path: Path, env: dict[str, str]) -> None:
    # A port picked by the caller and bound later by the host can be taken in between; port 0 cannot.
    host = HostProcess(make_app(tmp_path, HELLO), env=env)
    assert host.port is None
    host.start()
    try:
        assert host.port and f"http://127.0.0.1:{host.port}" in host.logs
        assert urllib.request.urlopen(host.url + "/api/hello", timeout=30).read() == b"hi"
    finally:
        host.stop()
