"""Throwaway function app for the dev host tests: one function per semantic under test.

Functions record what they saw as JSON lines in the file named by RECORD_FILE
(one small O_APPEND write per line, safe across threads and processes).
"""

import asyncio
import json
import os
import threading
import time
import typing

import azure.functions as func

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)


def record(**fields: object) -> None:
    path = os.environ.get("RECORD_FILE")
    if path:
        line = json.dumps({"pid": os.getpid(), "t": time.time(), **fields}) + "\n"
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)


@app.route(route="echo/{id:int}/{name?}", methods=["GET", "POST"])
def echo(req: func.HttpRequest) -> func.HttpResponse:
    body = {
        "method": req.method,
        "url": req.url,
        "route": dict(req.route_params),
        "params": dict(req.params),
        "header": req.headers.get("x-test"),
        "body": req.get_body().decode(),
    }
    resp = func.HttpResponse(json.dumps(body), status_code=201, mimetype="application/json")
    resp.headers["X-Reply"] = "yes"
    resp.headers.add("Set-Cookie", "a=1")
    resp.headers.add("Set-Cookie", "b=2")
    return resp


@app.route(route="echo/special", methods=["GET"])
def special(req: func.HttpRequest) -> str:
    return "literal wins"


@app.route(route="guid/{id:guid}")
def guid(req: func.HttpRequest) -> str:
    return req.route_params["id"]


@app.route(route="files/{*path}")
def files(req: func.HttpRequest) -> str:
    return req.route_params.get("path", "<none>")


@app.route(route="{items}/count", methods=["GET"])
def placeholder_not_resolved(req: func.HttpRequest) -> str:
    return "param:" + req.route_params["items"]


@app.route(route="%ITEMS_ROUTE%/list", methods=["GET"])
def setting_route(req: func.HttpRequest) -> str:
    return "setting route"


@app.route(route="settings", methods=["GET"])
def settings(req: func.HttpRequest) -> func.HttpResponse:
    keys = ("GREETING", "OVERRIDDEN")
    return func.HttpResponse(json.dumps({k: os.environ.get(k) for k in keys}), mimetype="application/json")


@app.route(route="secure/function", auth_level=func.AuthLevel.FUNCTION)
def secure_function(req: func.HttpRequest) -> str:
    return "function ok"


@app.route(route="secure/admin", auth_level=func.AuthLevel.ADMIN)
def secure_admin(req: func.HttpRequest) -> str:
    return "admin ok"


@app.route(route="sleep", methods=["GET"])
def sleep(req: func.HttpRequest) -> str:
    time.sleep(float(req.params.get("s", "1")))
    return "slept"


@app.route(route="asleep", methods=["GET"])
async def asleep(req: func.HttpRequest) -> str:
    await asyncio.sleep(float(req.params.get("s", "1")))
    return "async slept"


@app.route(route="boom")
def boom(req: func.HttpRequest) -> func.HttpResponse:
    raise RuntimeError("secret-internal-detail")


@app.route(route="ctx")
def ctx(req: func.HttpRequest, context: func.Context) -> func.HttpResponse:
    data = {
        "invocation_id": context.invocation_id,
        "function_name": context.function_name,
        "function_directory": context.function_directory,
        "traceparent": context.trace_context.trace_parent,
    }
    return func.HttpResponse(json.dumps(data), mimetype="application/json")


@app.route(route="nothing")
def nothing(req: func.HttpRequest) -> func.HttpResponse:
    # An HTTP function that returns None fails its invocation in the runtime (a 500 in Azure). Annotated -> None,
    # the runtime would refuse to index the whole app (tests/e2e/devhost/apps/refused).
    return None  # type: ignore[return-value]


@app.queue_trigger(arg_name="msg", queue_name="%OK_QUEUE%", connection="AzureWebJobsStorage")
def queue_ok(msg: func.QueueMessage, context: func.Context) -> None:
    record(
        fn="queue_ok",
        id=msg.id,
        body=msg.get_body().decode(),
        dequeue_count=msg.dequeue_count,
        pop_receipt=msg.pop_receipt is not None,
        insertion_time=msg.insertion_time is not None,
        expiration_time=msg.expiration_time is not None,
        time_next_visible=msg.time_next_visible is not None,
        type=type(msg).__module__ + "." + type(msg).__name__,
    )


@app.queue_trigger(arg_name="msg", queue_name="%FAIL_QUEUE%", connection="AzureWebJobsStorage")
def queue_fail(msg: func.QueueMessage) -> None:
    record(fn="queue_fail", id=msg.id, dequeue_count=msg.dequeue_count)
    raise RuntimeError("always fails")


@app.queue_trigger(arg_name="msg", queue_name="%SLOW_QUEUE%", connection="AzureWebJobsStorage")
async def queue_slow(msg: func.QueueMessage) -> None:
    record(fn="queue_slow", phase="start", id=msg.id, body=msg.get_body().decode(), dequeue_count=msg.dequeue_count)
    await asyncio.sleep(float(os.environ.get("SLOW_SECONDS", "6")))
    record(fn="queue_slow", phase="end", id=msg.id, body=msg.get_body().decode())


@app.queue_trigger(arg_name="msg", queue_name="%OUT_SRC_QUEUE%", connection="AzureWebJobsStorage")
@app.queue_output(arg_name="out", queue_name="%OUT_DST_QUEUE%", connection="AzureWebJobsStorage")
def queue_relay(msg: func.QueueMessage, out: func.Out[typing.List[str]]) -> None:  # noqa: UP006 - the runtime refuses list[str] here
    text = msg.get_body().decode()
    out.set([text.upper(), text.lower()])


@app.route(route="enqueue", methods=["POST"])
@app.queue_output(arg_name="out", queue_name="%OUT_DST_QUEUE%", connection="AzureWebJobsStorage")
def enqueue(req: func.HttpRequest, out: func.Out[str]) -> str:
    out.set(req.get_body().decode())
    return "queued"


@app.route(route="whoami", methods=["GET"])
def whoami(req: func.HttpRequest) -> func.HttpResponse:
    """Which process ran this: the language worker, a child of devhost (tests/e2e/devhost/test_devhost_worker.py)."""
    return func.HttpResponse(json.dumps({"pid": os.getpid(), "ppid": os.getppid()}), mimetype="application/json")


_held = threading.Condition()
_active = 0
_peak = 0


@app.route(route="hold", methods=["GET"])
def hold(req: func.HttpRequest) -> str:
    """Holds a pool thread until ``target`` calls run at once, or ``timeout`` seconds: shows the pool's size."""
    global _active, _peak
    target, timeout = int(req.params.get("target", "1")), float(req.params.get("timeout", "10"))
    with _held:
        _active += 1
        _peak = max(_peak, _active)
        _held.notify_all()
        _held.wait_for(lambda: _peak >= target, timeout=timeout)
        _active -= 1
    return "held"


@app.route(route="held", methods=["GET"])
async def held(req: func.HttpRequest) -> func.HttpResponse:
    """Async, so it answers on the worker's event loop while every pool thread is busy."""
    with _held:
        data = {"active": _active, "peak": _peak}
    return func.HttpResponse(json.dumps(data), mimetype="application/json")
