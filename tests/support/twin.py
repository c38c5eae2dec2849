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


def _parameters(value: Any) -> set[str]:
    try:
        return set(inspect.signature(value).parameters)
    except (TypeError, ValueError):
        return set()


def backend_fixtures(module: ModuleType) -> set[str]:
    """``backend`` and the module's fixtures that ask for it, directly or through one another."""
    fixtures = {name: v for name, v in vars(module).items() if type(v).__name__ == "FixtureFunctionDefinition"}
    needs = {"backend"}
    grew = True
    while grew:
        grew = False
        for name, fixture in fixtures.items():
            fixture_name = getattr(fixture, "name", None) or name
            if fixture_name not in needs and _parameters(fixture) & needs:
                needs.add(fixture_name)
                grew = True
    return needs


def takes_backend(value: Any, needs: set[str] = frozenset({"backend"})) -> bool:  # type: ignore[assignment]
    """A test function (or a test class with such a method) that asks for ``backend`` or a fixture built on it."""
    if inspect.isclass(value):
        return any(takes_backend(m, needs) for n, m in vars(value).items() if n.startswith("test"))
    return callable(value) and bool(_parameters(value) & needs)


def collect_again(module: ModuleType, namespace: dict[str, Any]) -> None:
    """Put ``module``'s backend scenarios, fixtures and helpers into the twin module's ``namespace``."""
    needs = backend_fixtures(module)
    for name, value in vars(module).items():
        if name.startswith("__") or name in namespace:
            continue
        if name.startswith(("test", "Test")) and not takes_backend(value, needs):
            continue
        namespace[name] = value
