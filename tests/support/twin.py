"""Collect a unit-tier scenario module again in the integration tier, where its ``backend`` is Azurite.

The scenarios are written once (tests/unit/…) and run on the in-memory fake there; a twin module under
tests/integration calls :func:`collect_again` so pytest collects the same functions under the twin's path, and the
tier decides the backend (``tests/conftest.py``). Only tests that take ``backend`` are collected again: the pure ones
would run twice on the same code. The module's fixtures and helpers come along, so the scenarios see what they see in
their own module (autouse fixtures included).
"""

from __future__ import annotations

import inspect
from types import ModuleType
from typing import Any


def takes_backend(value: Any) -> bool:
    """A test function (or a test class with a method) that asks for the ``backend`` fixture."""
    if inspect.isclass(value):
        return any(takes_backend(m) for n, m in vars(value).items() if n.startswith("test"))
    return callable(value) and "backend" in inspect.signature(value).parameters


def collect_again(module: ModuleType, namespace: dict[str, Any]) -> None:
    """Put ``module``'s backend scenarios, fixtures and helpers into the twin module's ``namespace``."""
    for name, value in vars(module).items():
        if name.startswith("__") or name in namespace:
            continue
        if name.startswith(("test", "Test")) and not takes_backend(value):
            continue
        namespace[name] = value
