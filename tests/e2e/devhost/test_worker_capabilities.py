"""The capabilities devhost offers in WorkerInitRequest, and how what the worker declares changes what it is sent.

The Functions host offers a worker nearly nothing (``HOST_CAPABILITIES``); the worker answers with what it handles
and the host adapts: HTTP bodies as bytes or text, ``rawBody`` or not, HTTP trigger metadata or not, and
``WorkerTerminate`` before ending a worker that handles it. Microsoft's runtime is checked for what it declares; a
scripted worker (tests/e2e/devhost/workers/scripted_worker.py) declares less, to show devhost honours each answer.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devhost import invoker, rpc
from devhost.functions import from_metadata
from devhost.http_server import DevHttpServer, build_table
from tests.support.devhost_helpers import BASIC_APP, read_records

SCRIPTED = Path(__file__).resolve().parent / "workers" / "scripted_worker.py"
RUNTIME_DECLARES = {
    "RawHttpBodyBytes", "TypedDataCollection", "RpcHttpBodyOnly", "WorkerStatus", "RpcHttpTriggerMetadataRemoved",
    "SharedMemoryDataTransfer",
}


class Scripted:
    def __init__(self, tmp_path: Path, caps: dict[str, str]) -> None:
        self.log = tmp_path / "scripted.jsonl"
        self.worker = rpc.LanguageWorker(
            tmp_path, env={"SCRIPTED_LOG": str(self.log), "SCRIPTED_CAPABILITIES": json.dumps(caps)},
            worker_args=[str(SCRIPTED)],
        )
        self.specs = from_metadata(self.worker.start(), tmp_path)

    def requests(self, kind: str) -> list[dict[str, Any]]:
        return [r for r in read_records(self.log) if r["kind"] == kind]


@pytest.fixture
def scripted(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Scripted]:
    worker = Scripted(tmp_path, request.param)
    try:
        yield worker
    finally:
        worker.worker.stop(grace=5)


def test_microsofts_runtime_is_offered_what_the_host_offers_and_its_answer_is_kept(tmp_path: Path) -> None:
    worker = rpc.LanguageWorker(BASIC_APP)
    try:
        worker.start()
        assert set(worker.capabilities.names) == RUNTIME_DECLARES
        assert worker.capabilities.raw_http_body_bytes and worker.capabilities.rpc_http_body_only
        assert not worker.capabilities.handles_worker_terminate
    finally:
        worker.stop()
    assert worker._proc is not None and worker._proc.returncode != 0  # no WorkerTerminate: it was signalled


@pytest.mark.parametrize("scripted", [{}], indirect=True)
def test_worker_init_request_carries_the_hosts_capabilities_not_the_workers(scripted: Scripted) -> None:
    (init,) = scripted.requests("worker_init_request")
    # What the Functions host sends with the shared-memory cache off; the worker's names are answers, not offers.
    assert init["capabilities"] == rpc.HOST_CAPABILITIES
    assert not set(init["capabilities"]) & RUNTIME_DECLARES


def _post_through_devhost(scripted: Scripted, body: bytes, content_type: str) -> dict[str, Any]:
    invoker.use_worker(scripted.worker)
    server = DevHttpServer(0, build_table(scripted.specs), "api")
    server.start()
    try:
        req = urllib.request.Request(f"http://127.0.0.1:{server.server_address[1]}/api/show?q=1", data=body,
                                     method="POST", headers={"content-type": content_type})
        with urllib.request.urlopen(req, timeout=60) as resp:
            seen: dict[str, Any] = json.loads(resp.read())
            return seen
    finally:
        server.stop_accepting()
        invoker.use_worker(None)  # type: ignore[arg-type]


@pytest.mark.parametrize("scripted", [dict.fromkeys(RUNTIME_DECLARES, "true")], indirect=True)
def test_a_worker_declaring_the_runtimes_http_capabilities_gets_bytes_only(scripted: Scripted) -> None:
    seen = _post_through_devhost(scripted, b'{"a": 1}', "application/json")
    assert seen == {"body": "bytes", "body_value": None, "raw_body": None, "trigger_metadata": []}


@pytest.mark.parametrize("scripted", [{}], indirect=True)
def test_a_worker_declaring_no_http_capabilities_gets_text_raw_body_and_trigger_metadata(scripted: Scripted) -> None:
    seen = _post_through_devhost(scripted, b'{"a": 1}', "application/json")
    assert seen == {"body": "json", "body_value": '{"a": 1}', "raw_body": "string",
                    "trigger_metadata": ["$request", "Headers", "Query"]}
    # Binary types stay bytes even without RawHttpBodyBytes.
    assert _post_through_devhost(scripted, b"\x00\xff", "application/octet-stream")["body"] == "bytes"


@pytest.mark.parametrize("scripted", [{"HandlesWorkerTerminateMessage": "true"}], indirect=True)
def test_a_worker_that_handles_terminate_is_asked_to_stop_with_the_grace_period(scripted: Scripted) -> None:
    scripted.worker.stop(grace=7)
    assert [r["grace_seconds"] for r in scripted.requests("worker_terminate")] == [7.0]
    assert scripted.worker._proc is not None and scripted.worker._proc.returncode == 0  # it ended itself


@pytest.mark.parametrize("scripted", [{}], indirect=True)
def test_a_worker_that_does_not_handle_terminate_is_not_sent_it(scripted: Scripted) -> None:
    scripted.worker.stop(grace=7)
    assert scripted.requests("worker_terminate") == []
    assert scripted.worker._proc is not None and scripted.worker._proc.returncode != 0
