"""devhost's side of the Functions RPC protocol against what Microsoft's runtime expects, per trigger kind.

Each test builds the message devhost sends (devhost/convert.py) and has azure-functions-runtime's own converters
(the code the worker runs) turn it into the object the function receives, or turns a function's value into the
message devhost reads back, so a format the runtime reads differently fails here.
"""

from __future__ import annotations

import base64
import json
import subprocess
import threading
import time
import typing
from datetime import UTC, datetime
from pathlib import Path

import azure.functions as func
import pytest
from azure_functions_runtime.bindings import meta

from devhost import convert, outputs
from devhost.proto import FunctionRpc_pb2 as pb

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module", autouse=True)
def _registry() -> None:
    meta.load_binding_registry()


def incoming(binding: str, data: pb.TypedData, pytype: type, metadata: dict[str, pb.TypedData] | None = None) -> typing.Any:
    return meta.from_incoming_proto(
        binding, pb.ParameterBinding(name="x", data=data), pytype=pytype, trigger_metadata=metadata,
        function_name="f",
    )


def test_http_request_reaches_the_function_as_sent() -> None:
    body = bytes(range(256))  # not UTF-8: must arrive byte for byte
    data = convert.http_request(
        "POST", "http://h:1/api/items/7?a=1,2&b=", {"X-Test": "Hi", "Content-Type": "application/octet-stream"},
        {"a": "1,2", "b": ""}, {"id": "7"}, body,
    )
    assert data.http.body.WhichOneof("data") == "bytes"
    assert set(data.http.headers) == {"x-test", "content-type"}  # lower-case names, as the host sends them
    req = incoming("httpTrigger", data, func.HttpRequest)
    assert req.method == "POST"
    assert req.url == "http://h:1/api/items/7?a=1,2&b="
    assert req.get_body() == body
    assert req.headers["x-test"] == "Hi"
    assert dict(req.params) == {"a": "1,2", "b": ""}
    assert dict(req.route_params) == {"id": "7"}


@pytest.mark.parametrize("content_type, body", [
    ("application/json", b'{"a": [1, "\xc3\xa9"]}'), ("text/plain; charset=utf-8", b"caf\xc3\xa9"),
    ("application/octet-stream", bytes(range(256))),
])
def test_http_body_for_a_worker_without_raw_bytes_still_reads_as_sent(content_type: str, body: bytes) -> None:
    """The text (or json) body a host sends a worker that did not declare RawHttpBodyBytes, and the rawBody it adds
    without RpcHttpBodyOnly, through the runtime's converter: the function reads the bytes the client sent."""
    caps = convert.WorkerCapabilities({})
    data = convert.http_request("POST", "http://h:1/api/x", {"Content-Type": content_type}, {}, {}, body, caps=caps)
    assert data.http.rawBody.WhichOneof("data") is not None
    req = incoming("httpTrigger", data, func.HttpRequest, convert.http_trigger_metadata(data, caps))
    assert req.get_body() == body


def test_http_response_status_headers_cookies_body() -> None:
    resp = func.HttpResponse(b"\x00\xffok", status_code=418, mimetype="application/octet-stream")
    resp.headers["X-Reply"] = "yes"
    resp.headers.add("Set-Cookie", "a=1; Path=/p; HttpOnly; Secure; SameSite=Strict")
    resp.headers.add("Set-Cookie", "b=2")
    data = meta.to_outgoing_proto("http", resp, pytype=func.HttpResponse, protos=pb)
    assert data.http.status_code == "418"  # a string on the wire
    answer = convert.http_response(data)
    assert answer is not None
    status, body, headers = answer
    assert (status, body) == (418, b"\x00\xffok")
    assert ("X-Reply".lower(), "yes") in [(k.lower(), v) for k, v in headers]
    cookies = [v for k, v in headers if k == "Set-Cookie"]
    assert cookies == ["a=1; path=/p; secure; samesite=strict; httponly", "b=2"]


def test_http_str_return_and_none() -> None:
    data = meta.to_outgoing_proto("http", "hello", pytype=str, protos=pb)
    answer = convert.http_response(data)
    assert answer is not None and answer[0] == 200 and answer[1] == b"hello"
    assert convert.http_response(None) is None  # the function gave no response: devhost answers 500


def test_queue_message_body_and_metadata() -> None:
    t0 = datetime(2026, 12, 1, 20, 5, 5, 163173, tzinfo=UTC)
    data, md = convert.queue_trigger(
        b"h\xc3\xa9llo", message_id="m-1", dequeue_count=3, pop_receipt="pr", inserted_on=t0,
        expires_on=t0.replace(day=8), next_visible_on=t0.replace(minute=15),
    )
    assert data.WhichOneof("data") == "string"
    assert md["DequeueCount"].json == "3"
    assert json.loads(md["InsertionTime"].json) == "2026-12-01T20:05:05.1631730+00:00"  # .NET round-trip format
    msg = incoming("queueTrigger", data, func.QueueMessage, md)
    assert msg.get_body().decode() == "héllo"
    assert (msg.id, msg.dequeue_count, msg.pop_receipt) == ("m-1", 3, "pr")
    assert msg.insertion_time == t0
    assert msg.expiration_time == t0.replace(day=8)
    assert msg.time_next_visible == t0.replace(minute=15)


def test_queue_binary_body_is_bytes() -> None:
    data, md = convert.queue_trigger(b"\xff\xfe", "m", 1, None, None, None, None)
    assert data.WhichOneof("data") == "bytes"
    assert incoming("queueTrigger", data, func.QueueMessage, md).get_body() == b"\xff\xfe"


def test_queue_outputs_one_message_per_element() -> None:
    binding = meta.to_outgoing_param_binding(
        "queue", ["A", "b"], pytype=typing.List[str], out_name="out", protos=pb,  # noqa: UP006
    )
    assert outputs.message_bodies(binding.data) == [b"A", b"b"]
    single = meta.to_outgoing_param_binding("queue", "one", pytype=str, out_name="out", protos=pb)
    assert outputs.encode(single.data) == [base64.b64encode(b"one").decode()]
    qm = func.QueueMessage(body=b'{"job": 1}')
    as_msg = meta.to_outgoing_param_binding("queue", qm, pytype=func.QueueMessage, out_name="out", protos=pb)
    assert outputs.message_bodies(as_msg.data) == [b'{"job": 1}']


def test_timer_info_json() -> None:
    status = {"Last": "2026-12-01T20:00:00+00:00", "Next": "2026-12-01T20:05:00+00:00", "LastUpdated": "x"}
    data = convert.timer_info(True, status)
    assert json.loads(data.json) == {"Schedule": {"AdjustForDST": True}, "ScheduleStatus": status, "IsPastDue": True}
    timer = incoming("timerTrigger", data, func.TimerRequest)
    assert timer.past_due is True
    assert timer.schedule_status == status
    assert incoming("timerTrigger", convert.timer_info(False, None), func.TimerRequest).past_due is False


def test_field_numbers_are_the_protocols() -> None:
    """A few numbers of the published FunctionRpc.proto: a renumbered field would still round-trip here."""
    sm = pb.StreamingMessage.DESCRIPTOR.fields_by_name
    expected = {
        "request_id": 1, "rpc_log": 2, "invocation_request": 4, "invocation_response": 5,
        "function_load_request": 8, "function_load_response": 9, "worker_init_response": 16,
        "worker_init_request": 17, "start_stream": 20, "functions_metadata_request": 29,
        "function_metadata_response": 30,
    }
    assert {k: sm[k].number for k in expected} == expected
    http = pb.RpcHttp.DESCRIPTOR.fields_by_name
    assert {k: http[k].number for k in ("body", "params", "status_code", "query", "cookies")} == {
        "body": 4, "params": 10, "status_code": 12, "query": 15, "cookies": 19,
    }
    assert pb.InvocationResponse.DESCRIPTOR.fields_by_name["return_value"].number == 4
    assert pb.StartStream.DESCRIPTOR.fields_by_name["worker_id"].number == 2


def test_generated_module_matches_the_proto(tmp_path: Path) -> None:
    pytest.importorskip("grpc_tools")
    subprocess.run([str(ROOT / "scripts" / "gen-proto"), str(tmp_path)], check=True, cwd=ROOT)
    fresh = (tmp_path / "devhost" / "proto" / "FunctionRpc_pb2.py").read_text()
    assert fresh == (ROOT / "devhost" / "proto" / "FunctionRpc_pb2.py").read_text(), "run scripts/gen-proto"


def test_a_runtime_call_that_raises_is_answered_as_a_failure_of_that_request(monkeypatch: pytest.MonkeyPatch) -> None:
    """A coroutine of the runtime that raises (not one that answers Failure) still answers its request.

    Without this the proxy's task died silently and devhost waited for ever for an invocation's answer, or 60 s
    for start-up and then exited with no reason.
    """
    import argparse
    import asyncio

    from devhost import worker as proxy

    async def boom(_request: typing.Any) -> typing.Any:
        raise RuntimeError("binding registry could not load")

    monkeypatch.setitem(proxy.ROUTES, "invocation_request", (boom, "invocation_response"))
    monkeypatch.setitem(proxy.ROUTES, "worker_init_request", (boom, "worker_init_response"))

    async def go() -> list[pb.StreamingMessage]:
        w = proxy.Worker(argparse.Namespace(host="127.0.0.1"))
        await w.handle(pb.StreamingMessage(
            request_id="r1", invocation_request=pb.InvocationRequest(invocation_id="inv-7", function_id="f1"),
        ))
        await w.handle(pb.StreamingMessage(request_id="r2", worker_init_request=pb.WorkerInitRequest()))
        await asyncio.sleep(0)  # send() hands over through call_soon_threadsafe
        return [w.outbox.get_nowait(), w.outbox.get_nowait()]

    # On a thread of its own: the e2e tier's browser tests (Playwright's sync API) can leave this thread marked as
    # running an event loop, and asyncio.run() refuses to start in such a thread.
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        invocation, init = pool.submit(asyncio.run, go()).result(timeout=60)
    assert invocation.request_id == "r1"
    assert invocation.invocation_response.invocation_id == "inv-7"
    assert invocation.invocation_response.result.status == pb.StatusResult.Failure
    assert "binding registry could not load" in invocation.invocation_response.result.exception.message
    assert init.worker_init_response.result.status == pb.StatusResult.Failure


def test_a_stream_from_a_worker_devhost_did_not_start_is_refused(tmp_path: Path) -> None:
    """Any local process can open the loopback port; only the worker id devhost started may take the stream.

    The stream carries every invocation (function keys, request bodies). An intruder's StartStream used to replace
    the worker's stream; now the host ends the intruder's stream and serves nothing on it.
    """
    import grpc

    from devhost import rpc
    from devhost import worker as proxy

    host = rpc.LanguageWorker(tmp_path)
    release, ended = threading.Event(), threading.Event()

    def requests() -> typing.Iterator[pb.StreamingMessage]:
        yield pb.StreamingMessage(request_id="x", start_stream=pb.StartStream(worker_id="an-intruder"))
        release.wait(30)  # keep the intruder's side open: only the host can end the stream early

    try:
        host._worker_id = "the-worker-devhost-started"  # what start() records before it spawns the process
        with grpc.insecure_channel(f"127.0.0.1:{host.port}") as channel:
            call = channel.stream_stream(
                proxy.EVENT_STREAM,
                request_serializer=pb.StreamingMessage.SerializeToString,
                response_deserializer=pb.StreamingMessage.FromString,
            )(requests())
            received: list[pb.StreamingMessage] = []
            reader = threading.Thread(target=lambda: (received.extend(call), ended.set()), daemon=True)
            reader.start()
            # Either the host ends the intruder's stream (refused) or takes it as its worker's (the old defect).
            deadline = time.monotonic() + 30
            while not ended.is_set() and host._stream is None and time.monotonic() < deadline:
                time.sleep(0.01)
            taken = host._stream is not None
            release.set()
            reader.join(30)
        assert not taken, "the intruder's stream became the worker stream"
        assert ended.is_set() and received == []
        with pytest.raises(rpc.WorkerDied):
            host._request(timeout=1, worker_status_request=pb.WorkerStatusRequest())
    finally:
        release.set()
        host.stop(grace=0)
