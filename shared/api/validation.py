"""Turn pydantic validation errors into problem+json field errors (``params.steps``, ``input[3].text``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from shared.core.errors import ValidationFailed
from shared.sdk.errors import ParamError


def field_path(prefix: str, loc: Sequence[int | str]) -> str:
    path = prefix
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path or "body"


def _loc(error: Any) -> tuple[int | str, ...]:
    # A model validator's ParamError names the field it blames: below the model, not the model itself.
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, ParamError):
        return (*error["loc"], *cause.field.split("."))
    return tuple(error["loc"])


def field_errors(err: ValidationError, prefix: str = "") -> list[dict[str, str]]:
    return [{"field": field_path(prefix, _loc(e)), "message": e["msg"]} for e in err.errors(include_url=False)[:50]]


def raise_for(err: ValidationError, prefix: str, detail: str) -> Any:
    errors = field_errors(err, prefix)
    names = ", ".join(e["field"] for e in errors[:5])
    raise ValidationFailed(f"{detail}: {names}", errors) from None
