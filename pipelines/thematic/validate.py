"""Submission-time validation and normalisation of the input list (→ HTTP 422 naming the field)."""

from __future__ import annotations

from typing import Any

from shared.sdk import ValidationFailed

from .params import MAX_RESPONSES, MAX_TEXT_CHARS

#: Report at most this many field errors: enough to fix a file, small enough for a response.
MAX_ERRORS = 50


def validate_input(data: Any) -> list[dict[str, Any]]:
    """Check ``[{id, text, metadata?}, ...]`` and return it normalised (ids kept as given).

    Accepts ``{"responses": [...]}`` too, for clients that must send an object.
    """
    if isinstance(data, dict) and set(data) == {"responses"}:
        data = data["responses"]
    if not isinstance(data, list):
        raise ValidationFailed(
            "input must be a list of {id, text, metadata?}", [{"field": "input", "message": "expected a list"}]
        )
    if not data:
        raise ValidationFailed("input is empty", [{"field": "input", "message": "at least one response is required"}])
    if len(data) > MAX_RESPONSES:
        raise ValidationFailed(
            f"too many responses ({len(data)} > {MAX_RESPONSES})",
            [{"field": "input", "message": f"at most {MAX_RESPONSES} responses per job"}],
        )
    errors: list[dict[str, str]] = []
    seen: dict[str, int] = {}
    out: list[dict[str, Any]] = []
    for i, item in enumerate(data):
        where = f"input[{i}]"
        if not isinstance(item, dict):
            errors.append({"field": where, "message": "expected an object {id, text, metadata?}"})
            continue
        extra = set(item) - {"id", "text", "metadata"}
        if extra:
            errors.append({"field": where, "message": f"unknown fields: {', '.join(sorted(map(str, extra)))}"})
        rid = item.get("id")
        # bool is an int subclass; True as an id is almost surely a mistake.
        if isinstance(rid, bool) or not isinstance(rid, (str, int)) or (isinstance(rid, str) and not rid.strip()):
            errors.append({"field": f"{where}.id", "message": "id must be a non-empty string or an integer"})
        else:
            key = str(rid)
            if len(key) > 200:
                errors.append({"field": f"{where}.id", "message": "id is longer than 200 characters"})
            elif key in seen:
                errors.append(
                    {"field": f"{where}.id", "message": f"duplicate id {key!r} (first at input[{seen[key]}])"}
                )
            else:
                seen[key] = i
        text = item.get("text")
        if not isinstance(text, str):
            errors.append({"field": f"{where}.text", "message": "text must be a string"})
        elif len(text) > MAX_TEXT_CHARS:
            errors.append({"field": f"{where}.text", "message": f"text is longer than {MAX_TEXT_CHARS} characters"})
        meta = item.get("metadata")
        if meta is not None and not isinstance(meta, dict):
            errors.append({"field": f"{where}.metadata", "message": "metadata must be an object"})
        if len(errors) >= MAX_ERRORS:
            break
        out.append({"id": rid, "text": text, **({"metadata": meta} if meta is not None else {})})
    if errors:
        raise ValidationFailed(
            f"{len(errors)} invalid response(s)" + (" (first 50 shown)" if len(errors) >= MAX_ERRORS else ""), errors
        )
    return out
