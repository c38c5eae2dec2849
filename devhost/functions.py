"""The app's functions as the language worker indexed them, as plain data devhost routes and polls by.

devhost does not import ``function_app.py``: the worker process does (devhost/worker.py, on Microsoft's
``azure-functions-runtime``), and answers ``FunctionsMetadataRequest`` with each function's name, its deterministic
id and its raw binding JSON, the same bindings the Functions host reads. Nothing here knows which functions exist:
whatever the app registers is served.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devhost.proto import FunctionRpc_pb2 as pb


@dataclass(frozen=True)
class FunctionSpec:
    """One indexed function: its id in the worker, trigger binding and other bindings as JSON dicts."""

    name: str
    function_id: str
    trigger: dict[str, Any]
    bindings: list[dict[str, Any]] = field(default_factory=list)
    directory: str = ""

    @property
    def trigger_type(self) -> str:
        return str(self.trigger.get("type", ""))

    def output_bindings(self, binding_type: str) -> list[dict[str, Any]]:
        """Output bindings of one type (e.g. ``queue``), ``$return`` included."""
        return [b for b in self.bindings if str(b.get("direction", "")).upper() == "OUT" and b.get("type") == binding_type]


def from_metadata(metadata: list[pb.RpcFunctionMetadata], app_dir: Path) -> list[FunctionSpec]:
    """Specs from the worker's ``FunctionMetadataResponse``."""
    specs: list[FunctionSpec] = []
    for fm in metadata:
        bindings = [json.loads(raw) for raw in fm.raw_bindings]
        triggers = [b for b in bindings if str(b.get("type", "")).endswith("Trigger")]
        if len(triggers) != 1:
            raise RuntimeError(f"function {fm.name} has {len(triggers)} triggers")
        specs.append(FunctionSpec(
            name=fm.name, function_id=fm.function_id, trigger=triggers[0], bindings=bindings,
            directory=fm.directory or str(app_dir),
        ))
    return specs
