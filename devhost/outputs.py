"""Output bindings: send what a function set on its queue outputs once it returns.

Only the ``queue`` output binding is supported. Values follow the Python
worker's queue converter: ``str``, ``bytes``, ``func.QueueMessage``, JSON-able
dicts, or a list of those (one message each). Messages are written base64
encoded, the trigger's default ``messageEncoding``.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import azure.functions as func

from devhost import config, storage
from devhost.functions import FunctionSpec

SUPPORTED_OUTPUTS = {"queue", "http"}


def _to_bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, func.QueueMessage):
        return value.get_body()
    if isinstance(value, (dict, int, float, bool)):
        return json.dumps(value).encode("utf-8")
    raise TypeError(f"unsupported queue output value type {type(value).__name__}")


def encode(value: Any) -> list[str]:
    """Queue message texts (base64) for one output value; a list gives several messages."""
    values = value if isinstance(value, (list, tuple)) else [value]
    return [base64.b64encode(_to_bytes(v)).decode("ascii") for v in values if v is not None]


def flush(spec: FunctionSpec, values: dict[str, Any]) -> None:
    """Send every queue output binding's value of one successful invocation."""
    for binding in spec.output_bindings("queue"):
        value = values.get(str(binding.get("name")))
        if value is None:
            continue
        client = storage.queue(binding.get("connection"), config.resolve(str(binding["queueName"])))
        for text in encode(value):
            client.send_message(text)
