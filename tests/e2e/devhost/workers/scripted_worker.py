"""A language worker that declares the capabilities in ``SCRIPTED_CAPABILITIES`` (JSON) instead of the runtime's.

It speaks the protocol through devhost/worker.py's proxy with the runtime's coroutines replaced, serves one HTTP
function ``show`` whose answer is what it received (the body's kind, ``rawBody``'s, the trigger metadata's names),
and appends every request it is sent (its kind and, for WorkerInitRequest, the capabilities) to ``SCRIPTED_LOG``.
So a test sees what devhost sends to a worker that declares less than Microsoft's runtime does.
"""

from __future__ import annotations

import json
import os
from typing import Any

# Importable: devhost starts every worker with the repository on PYTHONPATH.
from devhost import worker as proxy
from devhost.proto import FunctionRpc_pb2 as pb

FUNCTION_ID = "5c7a8e1e-0000-4000-8000-000000000001"


def note(**fields: Any) -> None:
    with open(os.environ["SCRIPTED_LOG"], "a", encoding="utf-8") as f:
        f.write(json.dumps(fields) + "\n")


async def init(request: proxy.WorkerRequest) -> pb.WorkerInitResponse:
    note(kind="worker_init_request", capabilities=dict(request.request.worker_init_request.capabilities))
    caps = json.loads(os.environ.get("SCRIPTED_CAPABILITIES", "{}"))
    return pb.WorkerInitResponse(capabilities=caps, result=pb.StatusResult(status=pb.StatusResult.Success))


async def metadata(request: proxy.WorkerRequest) -> pb.FunctionMetadataResponse:
    note(kind="functions_metadata_request")
    bindings = [
        {"type": "httpTrigger", "direction": "IN", "name": "req", "authLevel": "ANONYMOUS", "route": "show",
         "methods": ["POST"]},
        {"type": "http", "direction": "OUT", "name": "$return"},
    ]
    fm = pb.RpcFunctionMetadata(name="show", function_id=FUNCTION_ID, raw_bindings=[json.dumps(b) for b in bindings])
    return pb.FunctionMetadataResponse(
        function_metadata_results=[fm], result=pb.StatusResult(status=pb.StatusResult.Success),
    )


async def load(request: proxy.WorkerRequest) -> pb.FunctionLoadResponse:
    return pb.FunctionLoadResponse(
        function_id=request.request.function_load_request.function_id,
        result=pb.StatusResult(status=pb.StatusResult.Success),
    )


async def invoke(request: proxy.WorkerRequest) -> pb.InvocationResponse:
    inv = request.request.invocation_request
    http = inv.input_data[0].data.http
    seen = {
        "body": http.body.WhichOneof("data"),
        "body_value": getattr(http.body, http.body.WhichOneof("data") or "string", None)
        if http.body.WhichOneof("data") in ("string", "json") else None,
        "raw_body": http.rawBody.WhichOneof("data"),
        "trigger_metadata": sorted(inv.trigger_metadata),
    }
    answer = pb.RpcHttp(status_code="200", headers={"content-type": "application/json"},
                        body=pb.TypedData(bytes=json.dumps(seen).encode()))
    return pb.InvocationResponse(
        invocation_id=inv.invocation_id, return_value=pb.TypedData(http=answer),
        result=pb.StatusResult(status=pb.StatusResult.Success),
    )


class ScriptedWorker(proxy.Worker):
    async def handle(self, message: pb.StreamingMessage) -> None:
        kind = message.WhichOneof("content")
        if kind == "worker_terminate":
            note(kind=kind, grace_seconds=message.worker_terminate.grace_period.ToTimedelta().total_seconds())
        await super().handle(message)


proxy.ROUTES.update({
    "worker_init_request": (init, "worker_init_response"),
    "functions_metadata_request": (metadata, "function_metadata_response"),
    "function_load_request": (load, "function_load_response"),
    "invocation_request": (invoke, "invocation_response"),
})
proxy.Worker = ScriptedWorker  # type: ignore[misc]

if __name__ == "__main__":
    raise SystemExit(proxy.main())
