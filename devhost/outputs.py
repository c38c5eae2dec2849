"""Output bindings: send what a function set on its queue outputs once it returns.

Only the ``queue`` output binding is supported. The worker's queue converter has already turned the value into
``TypedData``: a ``str`` is ``string``, ``bytes`` is ``bytes``, a ``func.QueueMessage`` is ``json``
``{"id", "body"}``, and a list of those is a ``json`` array, which the host writes as one message per element (a
string element as its text, an object as its JSON). Messages are written base64 encoded, the trigger's default
``messageEncoding``.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from devhost import config, storage
from devhost.functions import FunctionSpec
from devhost.proto import FunctionRpc_pb2 as pb

SUPPORTED_OUTPUTS = {"queue", "http"}


def _element(value: Any) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, dict) and set(value) <= {"id", "body"} and isinstance(value.get("body"), str):
        return str(value["body"]).encode("utf-8")  # A func.QueueMessage: its body is the message.
    return json.dumps(value).encode("utf-8")


def message_bodies(data: pb.TypedData) -> list[bytes]:
    """The raw bodies of the queue messages one output value stands for."""
    kind = data.WhichOneof("data")
    if kind is None:
        return []
    if kind == "string":
        return [data.string.encode("utf-8")]
    if kind == "bytes":
        return [data.bytes]
    if kind == "json":
        value = json.loads(data.json)
        values = value if isinstance(value, list) else [value]
        return [_element(v) for v in values if v is not None]
    if kind == "int":
        return [str(data.int).encode()]
    if kind == "double":
        return [repr(data.double).encode()]
    if kind == "collection_string":
        return [s.encode("utf-8") for s in data.collection_string.string]
    if kind == "collection_bytes":
        return list(data.collection_bytes.bytes)
    raise TypeError(f"unsupported queue output data {kind}")


def encode(data: pb.TypedData) -> list[str]:
    """Queue message texts (base64) for one output value; a list gives several messages."""
    return [base64.b64encode(b).decode("ascii") for b in message_bodies(data)]


def flush(spec: FunctionSpec, values: dict[str, pb.TypedData]) -> None:
    """Send every queue output binding's value of one successful invocation."""
    for binding in spec.output_bindings("queue"):
        value = values.get(str(binding.get("name")))
        if value is None:
            continue
        texts = encode(value)
        if not texts:
            continue
        client = storage.queue(binding.get("connection"), config.resolve(str(binding["queueName"])))
        for text in texts:
            client.send_message(text)
