"""Domain errors carry no HTTP vocabulary: the edge (``shared.api.problems``) alone maps them to a status.

The LLM errors used to declare ``status``, ``slug`` and ``title`` that nothing read; a reader of one would think
it decided the HTTP answer. Every error class of the platform and the pipelines is checked here.
"""

from __future__ import annotations

import importlib
import pkgutil

import shared
import shared.llm.client  # the LLM errors live here
from shared.sdk.errors import ThematiqError


def _subclasses(cls: type) -> set[type]:
    out = set()
    for sub in cls.__subclasses__():
        out |= {sub, *_subclasses(sub)}
    return out


def test_no_domain_error_declares_an_http_status_slug_or_title() -> None:
    for mod in pkgutil.walk_packages(shared.__path__, "shared."):
        importlib.import_module(mod.name)
    errors = _subclasses(ThematiqError)
    assert len(errors) > 10
    offenders = sorted(
        f"{e.__module__}.{e.__qualname__}.{attr}"
        for e in errors
        for attr in ("status", "slug", "title")
        if attr in vars(e)
    )
    assert offenders == []
