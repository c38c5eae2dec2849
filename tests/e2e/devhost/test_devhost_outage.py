"""Timers and queue listeners survive a storage outage: they log warnings and resume, never stop.

Regression tests: a storage call of the timer failing after the SDK's retries (an
outage of more than ~90 s) ended the timer thread (``timer ... stopped after an
error``), a renewal failing with a connection error killed the renewal thread
(the timer then ran on without a lease), and a lost listener lock ended the
timer thread silently: in every case e.g. the reaper never ran again in that host.
"""

from __future__ import annotations

import base64
import json
import secrets
import time
from pathlib import Path

from azure.storage.blob import BlobLeaseClient, ContainerClient
from azure.storage.queue import QueueClient

from devhost.azurite import Azurite
from devhost.process import HostProcess
from tests.support.devhost_helpers import wait_for

OUTAGE_SECONDS = 8

HOST_JSON = {
    "version": "2.0",
    "extensions": {"queues": {"maxPollingInterval": "00:00:01"}},
    "singleton": {"listenerLockPeriod": "00:00:15", "listenerLockRecoveryPollingInterval": "00:00:01"},
}

APP = """
import os, time
import azure.functions as func

app = func.FunctionApp()

def record(kind, text=""):
    with open(os.environ["RECORD_FILE"], "a") as f:
        f.write(f"{kind} {time.time()} {text}\\n")

@app.timer_trigger(arg_name="t", schedule="*/2 * * * * *", use_monitor=True)
def tick(t: func.TimerRequest) -> None:
    record("tick")

@app.queue_trigger(arg_name="msg", queue_name="%OUTAGE_QUEUE%", connection="AzureWebJobsStorage")
def got(msg: func.QueueMessage) -> None:
    record("msg", msg.get_body().decode())
"""


def _records(path: Path, kind: str) -> list[tuple[float, str]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        parts = line.split(" ", 2)
        if parts[0] == kind:
            out.append((float(parts[1]), parts[2] if len(parts) > 2 else ""))
    return out


def test_timer_and_queue_resume_after_storage_outage(tmp_path: Path) -> None:
    app = tmp_path / "outageapp"
    app.mkdir()
    (app / "host.json").write_text(json.dumps(HOST_JSON))
    (app / "function_app.py").write_text(APP)
    record = tmp_path / "records.txt"
    az = Azurite.private().start()
    env = {
        "AzureWebJobsStorage": az.connection_string,
        "RECORD_FILE": str(record),
        "OUTAGE_QUEUE": f"outage-{secrets.token_hex(4)}",
        "AzureFunctionsWebHost__hostid": f"outage-{secrets.token_hex(4)}",
    }
    host = HostProcess(app, env=env, args=["--no-http"])
    try:
        host.start()
        wait_for(lambda: len(_records(record, "tick")) >= 2, timeout=30)  # holds the lock, status written

        az.stop()  # keeps its data; the host's lease renewal and status writes now fail
        time.sleep(OUTAGE_SECONDS)
        # The outage lasts until both failures were seen, not a fixed time: a receive begun just before it spends
        # its SDK retries (3, ~2 s apart) inside the outage, and on a loaded machine an 8 s outage could end before
        # they ran out, so the listener never saw a failure to log (a full run at load ~4 did, 2026-12-03).
        wait_for(lambda: "receive from queue" in host.logs and "could not write its schedule status" in host.logs,
                 timeout=60)
        az.start()
        up = time.time()

        queue = QueueClient.from_connection_string(az.connection_string, env["OUTAGE_QUEUE"])
        queue.send_message(base64.b64encode(b"after the outage").decode())
        # Both resume promptly: the timer on its next occurrences, the listener within its back-off (1 s and 2 s
        # apart; the bounds are generous for a loaded machine, and still below the 15 s listener lock period).
        wait_for(lambda: len([t for t, _ in _records(record, "tick") if t > up]) >= 2, timeout=30)
        msgs = wait_for(lambda: _records(record, "msg"), timeout=30)
        assert [text for _, text in msgs] == ["after the outage"]
        first_tick = min(t for t, _ in _records(record, "tick") if t > up)
        assert first_tick - up < 12, f"timer resumed {first_tick - up:.1f}s after the outage"
        assert msgs[0][0] - up < 12, f"queue listener resumed {msgs[0][0] - up:.1f}s after the outage"
        assert host.running()
    finally:
        host.stop(timeout=15)
        az.close()
    logs = host.logs
    assert "stopped after an error" not in logs
    assert "could not write its schedule status" in logs  # a warning, and the schedule went on
    assert "receive from queue" in logs  # a warning, then back-off and polling again
    assert "Traceback" not in logs


def _app(tmp_path: Path) -> Path:
    app = tmp_path / "lockapp"
    app.mkdir()
    (app / "host.json").write_text(json.dumps(HOST_JSON))
    (app / "function_app.py").write_text(APP)
    return app


def test_timer_takes_its_lock_again_after_losing_it(azurite: str, tmp_path: Path) -> None:
    record = tmp_path / "records.txt"
    host_id = f"lock-{secrets.token_hex(4)}"
    env = {
        "AzureWebJobsStorage": azurite,
        "RECORD_FILE": str(record),
        "OUTAGE_QUEUE": f"lock-{secrets.token_hex(4)}",
        "AzureFunctionsWebHost__hostid": host_id,
    }
    container = ContainerClient.from_connection_string(azurite, "azure-webjobs-hosts")
    blob = container.get_blob_client(f"locks/{host_id}/Host.Functions.tick.Listener")
    with HostProcess(_app(tmp_path), env=env, args=["--no-http"]) as host:
        wait_for(lambda: _records(record, "tick"), timeout=30)
        # Another host takes the lock (as after a lease that expired during an outage).
        BlobLeaseClient(blob).break_lease(lease_break_period=0)
        other = BlobLeaseClient(blob)
        other.acquire(lease_duration=15)
        wait_for(lambda: "lost listener lock" in host.logs, timeout=30)  # at the next renewal (7.5 s)
        lost = time.time()
        other.renew()  # a slow notice must not let the other's 15 s lease lapse inside the window below
        time.sleep(2)  # a window for a tick without the lock to show: absence has no event to wait for
        assert not [t for t, _ in _records(record, "tick") if t > lost + 1], "ran without the lock"
        other.release()
        released = time.time()
        wait_for(lambda: [t for t, _ in _records(record, "tick") if t > released], timeout=30)
        assert host.running()
    assert "stopped after an error" not in host.logs
