"""devhost's side of the Functions RPC protocol against what Microsoft's runtime expects, per trigger kind.

Each test builds the message devhost sends (devhost/convert.py) and has azure-functions-runtime's own converters
(the code the worker runs) turn it into the object the function receives, or turns a function's value into the
message devhost reads back, so a format the runtime reads differently fails here.
"""

from __future__ import annotations

import base64
import json
import subprocess
import typing
from datetime import UTC, datetime
from pathlib import Path

import azure.functions as func
import pytest
from azure_functions_runtime.bindings import meta

from devhost import convert, outputs
from devhost.proto import FunctionRpc_pb2 as pb

ROOT = Path(__file__).resolve().parents[2]


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
