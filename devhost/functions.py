"""Load ``function_app.py`` and describe its functions as plain data.

The real Python worker indexes the app by calling ``app.get_functions()``; the
dev host does the same, exactly once (a second call raises ``ValueError``
because the SDK's duplicate-name check keeps state). Nothing here knows which
functions exist: whatever the app registers is served.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import azure.functions as func
from azure.functions.decorators.function_app import FunctionRegister


@dataclass(frozen=True)
class FunctionSpec:
    """One indexed function: its callable, trigger binding and other bindings as JSON dicts."""

    name: str
    callable: Callable[..., Any]
    trigger: dict[str, Any]
    bindings: list[dict[str, Any]] = field(default_factory=list)
    directory: str = ""

    @property
    def trigger_type(self) -> str:
        return str(self.trigger.get("type", ""))

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.callable)

    @property
    def parameters(self) -> list[str]:
        return list(inspect.signature(self.callable).parameters)

    def output_bindings(self, binding_type: str) -> list[dict[str, Any]]:
        """Output bindings of one type (e.g. ``queue``), ``$return`` included."""
        return [b for b in self.bindings if b.get("direction") == "OUT" and b.get("type") == binding_type]


def find_app(module: Any) -> FunctionRegister:
    """The module-level ``FunctionApp`` (any ``FunctionRegister``) in ``module``."""
    apps = [v for v in vars(module).values() if isinstance(v, FunctionRegister)]
    # Blueprints are not FunctionRegisters; they are registered into the app, whose
    # get_functions() then includes their functions. Prefer a FunctionApp if several exist.
    real = [a for a in apps if isinstance(a, func.FunctionApp)] or apps
    if len(real) != 1:
        raise RuntimeError(f"expected exactly one FunctionApp in {module.__name__}, found {len(real)}")
    return real[0]


def load_app(app_dir: Path, module_name: str = "function_app") -> list[FunctionSpec]:
    """Import ``function_app.py`` from ``app_dir`` (cwd and sys.path set there) and index it."""
    app_dir = app_dir.resolve()
    os.chdir(app_dir)
    # First on sys.path, so the app's own packages win over same-named ones elsewhere.
    sys.path.insert(0, str(app_dir))
    module = importlib.import_module(module_name)
    app = find_app(module)
    specs: list[FunctionSpec] = []
    for fn in app.get_functions():  # Only call: a second call raises ValueError.
        bindings = [json.loads(raw) for raw in fn.get_raw_bindings()]
        triggers = [b for b in bindings if str(b.get("type", "")).endswith("Trigger")]
        if len(triggers) != 1:
            raise RuntimeError(f"function {fn.get_function_name()} has {len(triggers)} triggers")
        specs.append(
            FunctionSpec(
                name=str(fn.get_function_name()),
                callable=fn.get_user_function(),
                trigger=triggers[0],
                bindings=bindings,
                directory=str(app_dir),
            )
        )
    return specs
