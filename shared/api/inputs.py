"""The platform's rules for the responses of a pipeline that lists them (``Pipeline.responses``), at submission.

Such a pipeline's rows are served as submitted (``shared.sdk.responses.ResponseRow``: ``id``, ``text``,
``metadata``): every metadata key becomes a ``metadata[KEY]`` filter of ``GET /api/jobs/{id}/responses`` and a
column of the CSV and xlsx exports, and every id a cell and a line of them. So, before anything is stored:

* a metadata key is a name that filter can take and a heading can show: 1 to ``MAX_METADATA_KEY_CHARS``
  characters, at least one visible, and no control character, line break or direction override (the label rule;
  an empty key was stored and could never be filtered on);
* a job's responses have at most ``MAX_METADATA_KEYS`` distinct keys (50,000 keys made as many columns);
* a response id given as a string follows the label rule too (integers are ids as they are).

One pass over the validated responses, which also counts the keys: each distinct key is checked once, and the pass
stops at the first key past the limit, so a body of 50,000 keys costs no more than one of 1,001. Each error names
its field (``input[3].metadata``, ``input[3].id``) as the pipeline's own checks do.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

from shared.config.constants import INVISIBLE_IN_NAME, MAX_METADATA_KEY_CHARS, MAX_METADATA_KEYS
from shared.core.errors import ValidationFailed

#: As the pipeline's own checks: enough errors to fix a file, few enough for a response.
MAX_ERRORS = 50


def _shown(value: str) -> str:
    """``value`` quoted as JSON, its invisible characters escaped (``"a\\u2028b"``), cut at 40 characters."""
    cut = value[:40] + ("…" if len(value) > 40 else "")
    # json.dumps escapes C0 controls; C1 controls and the separators and overrides are escaped the same way.
    return INVISIBLE_IN_NAME.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(cut, ensure_ascii=False))


def _shows(value: str) -> bool:
    # A letter, mark, digit, punctuation or symbol: not only spaces and format characters (a zero-width space).
    return any(unicodedata.category(c)[0] not in "ZC" for c in value)


def name_problem(value: str) -> str | None:
    """Why ``value`` cannot be a heading (the label rule), or None."""
    if INVISIBLE_IN_NAME.search(value):
        return "has a control character, line break or direction override"
    if not _shows(value):
        return "shows nothing (only spaces or format characters)"
    return None


def _key_problem(key: str) -> str | None:
    if not key:
        return 'is empty: a key is a column heading and a metadata[KEY] filter, and "" can be neither'
    if len(key) > MAX_METADATA_KEY_CHARS:
        return f"is {len(key):,} characters long; at most {MAX_METADATA_KEY_CHARS} (what metadata[KEY] takes)"
    return name_problem(key)


def rows_of(data: Any) -> list[Any]:
    """The responses of a validated input: the list itself, or the ``responses`` of ``{"responses": [...]}``."""
    rows = data.get("responses") if isinstance(data, dict) else data
    return rows if isinstance(rows, list) else []


def check_responses(data: Any) -> None:
    """A 422 naming every response id and metadata key that breaks the rules above (at most 50), else nothing."""
    errors: list[dict[str, str]] = []
    keys: set[str] = set()  # the distinct good keys so far
    bad: set[str] = set()   # a bad key is named where it first occurs
    for i, item in enumerate(rows_of(data)):
        if len(errors) >= MAX_ERRORS:
            break
        if not isinstance(item, dict):
            continue
        rid = item.get("id")
        if isinstance(rid, str) and (problem := name_problem(rid)):
            errors.append({"field": f"input[{i}].id", "message": f"the id {_shown(rid)} {problem}"})
        meta = item.get("metadata")
        if not isinstance(meta, dict):
            continue
        for key in meta:
            if key in keys or key in bad:
                continue
            if (problem := _key_problem(key)) is not None:
                bad.add(key)
                errors.append({"field": f"input[{i}].metadata", "message": f"the metadata key {_shown(key)} {problem}"})
                continue
            keys.add(key)
            if len(keys) > MAX_METADATA_KEYS:
                errors.append({"field": f"input[{i}].metadata", "message": (
                    f"the metadata key {_shown(key)} is the job's {len(keys):,}th distinct key; a job's responses "
                    f"have at most {MAX_METADATA_KEYS:,} (each is a column of the exports)")})
                raise ValidationFailed(_detail(errors), errors)
    if errors:
        raise ValidationFailed(_detail(errors), errors)


def _detail(errors: list[dict[str, str]]) -> str:
    names = ", ".join(e["field"] for e in errors[:5])
    return f"{len(errors)} invalid response(s){' (first 50 shown)' if len(errors) >= MAX_ERRORS else ''}: {names}"
