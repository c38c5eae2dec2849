"""``PATCH /api/jobs/{id}/themes`` for thematic results: a researcher's codebook edits applied to a finished job.

The platform hands over the current result, the request body and the job's stored input; this returns the new
result (or raises ``ValidationFailed`` naming the field) and the platform stores it under an ``If-Match``. The
edits (``codebook.py``) move assignments and counts; everything that follows from them (sentiment per theme,
breakdowns, the comparison with an earlier wave) is recomputed here, and each edit is logged with its time.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shared.sdk import ValidationFailed

from . import codebook, derive
from .insight import MIN_GROUP_SIZE
from .result import ThematicResult
from .validate import responses_of

#: The ops of an edit: pydantic names a field of one as edits[i].<op>.<field>.
_OPS: Final = frozenset({"rename", "merge", "split", "delete"})
#: Edits in one request: a researcher's session of renames and merges, not a script's bulk rewrite.
MAX_EDITS: Final = 50


class ThemesPatch(BaseModel):
    """The body of ``PATCH /api/jobs/{id}/themes``."""

    model_config = ConfigDict(extra="forbid")

    edits: list[codebook.Edit] = Field(min_length=1, max_length=MAX_EDITS)


def _field(loc: tuple[int | str, ...]) -> str:
    if len(loc) > 2 and loc[0] == "edits" and loc[2] in _OPS:
        loc = loc[:2] + loc[3:]  # edits[0].label, not the discriminated union's edits[0].rename.label
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "body"


def _fold_then(doc: dict[str, Any], edits: list[Any]) -> None:
    """A merge says the merged themes are one: their counts in the earlier wave are summed too, or the
    comparison would call the absorbed ones "gone". A delete says the theme is none, in both waves (the instrument
    codes its answers to no theme in the next one too): it leaves the earlier wave's counts, or an unchanged wave
    showed it "gone", falling significantly, by the edit's doing."""
    comparison = doc.get("comparison")
    if comparison is None:
        return
    then = comparison["then"]
    for edit in edits:
        if isinstance(edit, codebook.Merge) and any(t in then for t in edit.themes):
            into = then.setdefault(edit.themes[0], {"label": edit.themes[0], "count": 0})
            for other in edit.themes[1:]:
                if other in then:
                    into["count"] += then.pop(other)["count"]
        elif isinstance(edit, codebook.Delete):
            then.pop(edit.theme, None)


def edit_result(doc: dict[str, Any], body: Any, data: Any) -> dict[str, Any]:
    """The result with the edits of ``body`` (``{"edits": [...]}``) applied, derived tables recomputed."""
    try:
        patch = ThemesPatch.model_validate(body)
    except ValidationError as err:
        errors = [{"field": _field(tuple(e["loc"])), "message": e["msg"]} for e in err.errors(include_url=False)[:50]]
        raise ValidationFailed("invalid edits: " + ", ".join(e["field"] for e in errors[:5]), errors) from None
    responses = responses_of(data)
    texts = {str(r["id"]): str(r.get("text", "")) for r in responses}
    metadata = {str(r["id"]): r.get("metadata") for r in responses}
    before = len(doc.get("edits", []))
    try:
        out = codebook.apply_edits(doc, patch.edits, texts)
    except codebook.EditError as err:
        raise ValidationFailed(f"invalid edit: {err.field}", [{"field": err.field, "message": str(err)}]) from None
    at = datetime.now(UTC).isoformat(timespec="seconds")
    for entry in out["edits"][before:]:
        entry["at"] = at
    _fold_then(out, patch.edits)
    params = doc.get("run", {}).get("params", {})
    derive.refresh(
        out, metadata, breakdown_by=params.get("breakdown_by"),
        min_group_size=int(params.get("min_group_size") or MIN_GROUP_SIZE),
        score=params.get("score"),
    )
    # The stored document must stay a valid result: a broken edit is our bug, found here and not by a reader.
    ThematicResult.model_validate(out)
    return out


def render_codebook(doc: dict[str, Any]) -> tuple[str, bytes]:
    """``?format=codebook``: the themes as a codebook, ready to send back as ``seed_themes``, and the edit log."""
    body = {"themes": codebook.codebook(doc), "edits": doc.get("edits", [])}
    return "application/json", json.dumps(body, ensure_ascii=False).encode("utf-8")
