"""Find pipelines by name.

Built-in and third-party pipelines register the same way: an entry point in
the group ``thematiq.pipelines`` whose value is ``module:attribute`` naming a
:class:`shared.sdk.pipeline.Pipeline`. When this project is pip-installed the
entry points come from its metadata; when it is deployed as a plain folder (an
Azure Functions zip, which installs only ``requirements.txt``) they are read
from the same table in ``pyproject.toml``, so there is still one declaration.

Tests register pipelines explicitly with :meth:`Registry.register`.
"""

from __future__ import annotations

import importlib
import logging
import tomllib
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path
from threading import Lock
from typing import Any

from shared.config.settings import raw
from shared.sdk.pipeline import Pipeline

GROUP = "thematiq.pipelines"
_PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
log = logging.getLogger(__name__)


def load_ref(ref: str) -> Pipeline:
    """Import ``module:attribute`` and check it is a Pipeline."""
    module_name, _, attr = ref.partition(":")
    obj = getattr(importlib.import_module(module_name), attr)
    if not isinstance(obj, Pipeline):
        raise TypeError(f"{ref} is not a Pipeline")
    return obj


def load_function(ref: str) -> Callable[..., Any]:
    """Import ``module:qualname`` naming a function (a map stage's chunk function)."""
    module_name, _, qualname = ref.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"{ref} is not callable")
    return obj  # type: ignore[no-any-return]


def declared_refs() -> dict[str, str]:
    """name -> ``module:attribute`` from installed entry points, falling back to pyproject.toml."""
    refs = {ep.name: ep.value for ep in entry_points(group=GROUP)}
    if _PYPROJECT.exists():
        table = tomllib.loads(_PYPROJECT.read_text()).get("project", {}).get("entry-points", {}).get(GROUP, {})
        for name, ref in table.items():
            refs.setdefault(name, ref)
    return refs


class Registry:
    """Maps pipeline names to loaded pipelines and to the reference a child process imports."""

    def __init__(self, refs: dict[str, str] | None = None) -> None:
        self._refs = dict(refs) if refs is not None else None
        self._loaded: dict[str, Pipeline] = {}
        self._lock = Lock()

    def _all_refs(self) -> dict[str, str]:
        if self._refs is None:
            self._refs = declared_refs()
        return self._refs

    def register(self, ref: str) -> Pipeline:
        """Register the pipeline at ``module:attribute`` (it must be importable by a child process)."""
        pipeline = load_ref(ref)
        with self._lock:
            self._all_refs()[pipeline.name] = ref
            self._loaded[pipeline.name] = pipeline
        return pipeline

    def names(self) -> list[str]:
        disabled = disabled_pipelines()
        return sorted(n for n in self._all_refs() if n not in disabled)

    def ref(self, name: str) -> str:
        return self._all_refs()[name]

    def get(self, name: str) -> Pipeline | None:
        """The pipeline called ``name``, or None if there is none or it is disabled in this deployment."""
        if name in disabled_pipelines():
            return None
        with self._lock:
            if name in self._loaded:
                return self._loaded[name]
            ref = self._all_refs().get(name)
            if ref is None:
                return None
            pipeline = load_ref(ref)
            if pipeline.name != name:
                raise TypeError(f"entry point {name!r} names a pipeline called {pipeline.name!r}")
            self._loaded[name] = pipeline
            return pipeline


def disabled_pipelines() -> frozenset[str]:
    # Read on every lookup (it is one environment read) so a settings change needs no restart logic.
    return frozenset(n.strip() for n in raw("DISABLED_PIPELINES").split(",") if n.strip())


_default = Registry()


def default_registry() -> Registry:
    return _default
