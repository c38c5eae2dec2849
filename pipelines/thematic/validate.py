"""Submission-time validation and normalisation of the input list (→ HTTP 422 naming the field)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from shared.sdk import EarlierResults, ValidationFailed

from .baseline import baseline_of
from .impact import problem as score_problem
from .params import MAX_RESPONSES, MAX_TEXT_CHARS, SCORE_RANGE, ThematicParams
from .sentiment import LLM_MAX_RESPONSES, declared_problems, rating_scale

#: Report at most this many field errors: enough to fix a file, small enough for a response.
MAX_ERRORS = 50


def validate_input(data: Any) -> list[dict[str, Any]]:
    """Check ``[{id, text, metadata?}, ...]`` and return it normalised (ids kept as given).

    Accepts ``{"responses": [...]}`` too, for clients that must send an object. A ``baseline`` beside it is
    what ``prepare`` stored for ``compare_to`` (a retried job resubmits its stored input): it is dropped here
    and computed afresh from ``compare_to``, so a client can never supply its own.
    """
    if isinstance(data, dict) and "responses" in data and set(data) <= {"responses", "baseline"}:
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


def responses_of(data: Any) -> list[dict[str, Any]]:
    """The responses of a stored input: the list itself, or ``{"responses": [...], "baseline": {...}}``."""
    if isinstance(data, dict):
        return list(data.get("responses", []))
    return list(data)


def _keys_of(data: list[dict[str, Any]]) -> tuple[Counter[str], set[str]]:
    """How many responses have each metadata key, and the keys some response gives a value (not null, not ""):
    what a breakdown can group."""
    keys: Counter[str] = Counter()
    valued: set[str] = set()
    for item in data:
        meta = item.get("metadata") or {}
        keys.update(str(k) for k in meta)
        valued.update(str(k) for k, v in meta.items() if v is not None and v != "")
    return keys, valued


def _compare_problems(params: ThematicParams) -> list[dict[str, str]]:
    """Wave params that would do nothing, silently: ``compare_mode`` "discover" without ``compare_to``, and
    ``multi_label`` on a compared wave. Checked at submission only: the worker re-reads stored params (whose
    ``compare_mode`` is always there, "inherit" by default), and a job queued before the check must still run."""
    errors: list[dict[str, str]] = []
    if params.compare_to is None and params.compare_mode != "inherit":
        # "discover" says how to compare with an earlier wave; with none it did nothing, silently. (The default
        # "inherit" is in every stored params, so only the value that cannot be a default is refused.)
        errors.append({"field": "params.compare_mode",
                       "message": f"compare_mode {params.compare_mode!r} needs compare_to (the earlier job's id)"})
    if params.compare_to is not None and params.multi_label:
        # A compared wave is coded one theme per answer: by the earlier instrument's nearest centroid (inherit) or
        # by mapping its discovered themes onto the earlier ones (discover), the rule "then" was counted by. Its
        # secondary themes were dropped without a word.
        errors.append({"field": "params.multi_label",
                       "message": "a wave compared with an earlier job (compare_to) is coded one theme per answer, "
                                  "as the earlier wave was counted; multi_label does not apply: send it false, or "
                                  "leave out compare_to"})
    return errors


def scale_conflict(params: ThematicParams) -> dict[str, str] | None:
    """The 422 entry when ``sentiment_from`` and ``score`` declare one metadata key on two different ranges (consist46).

    The job reads a key on one scale: the sentiment's, the score's mean and the breakdown's groups. With ``score``
    {"key": "r", "scale": "1-5"} and ``sentiment_from`` {"key": "r", "scale": "0-10"} the sentiment read r as NPS
    groups (a 5 a detractor), the score as stars (a 5 the best), and the breakdown by r took the sentiment's
    groups, with nothing saying the two disagreed. Which one the researcher meant is theirs to say. A score of
    scale "numeric" declares no range, so it agrees with any; "nps" is the range 0-10, "csat" 1-5
    (params.SCORE_RANGE). Checked at submission only: a queued job's stored params still run as they did."""
    sf, score = params.sentiment_from, params.score
    if sf is None or score is None or sf.scale is None or sf.key != score.key:
        return None
    theirs = SCORE_RANGE.get(score.scale)
    if theirs is None or theirs == sf.scale:
        return None
    named = f"{score.scale!r} ({theirs})" if theirs != score.scale else repr(score.scale)
    return {"field": "params.sentiment_from.scale",
            "message": f"{sf.key!r} is declared {sf.scale!r} here and {named} by params.score.scale: one key is read "
                       f"on one scale (the sentiment, the score and a breakdown by it); declare the same range for "
                       f"both, or leave out sentiment_from's scale and it reads the score's"}


def _sentiment_from_problems(params: ThematicParams, data: list[dict[str, Any]], keys: Counter[str],
                             seen: str) -> list[dict[str, str]]:
    """``params.sentiment_from`` against the input: its key, and its values on its scale (declared or inferred)."""
    errors: list[dict[str, str]] = []
    if params.sentiment_from is None:
        return errors
    key, declared = params.sentiment_from.key, params.sentiment_from.scale
    # The object form names its parts (as params.score does); the plain key is the field itself.
    field = "params.sentiment_from" if declared is None else "params.sentiment_from.key"
    values = [(item.get("metadata") or {}).get(key) for item in data]
    if key not in keys:
        errors.append({"field": field, "message": f"no response has the metadata key {key!r} (keys seen: {seen})"})
    elif declared is None and params.sentiment_scale() is not None:
        pass  # read on the range params.score declares for this key, whose check (in prepare) names params.score
    elif declared is None:
        scale = rating_scale(values)
        if isinstance(scale, str):
            errors.append({"field": field, "message": f"{key!r}: {scale}"})
    elif not any(v is not None and v != "" for v in values):
        errors.append({"field": field, "message": f"{key!r}: no response has a value"})
    else:
        # A value that is no number is the row's fault (named there); a number outside the range says the
        # declaration does not fit the data (params.sentiment_from.scale), with the first rows that show it.
        problems = declared_problems(values, declared)
        for i, _, v in [p for p in problems if p[1] == "value"][:MAX_ERRORS // 2]:
            errors.append({"field": f"input[{i}].metadata.{key}",
                           "message": f"not a number on the declared {declared} scale: "
                                      f"{json.dumps(v, ensure_ascii=False)[:40]}"})
        outside = [(i, v) for i, fault, v in problems if fault == "scale"]
        if outside:
            rows = ", ".join(f"input[{i}] has {v!r}" for i, v in outside[:5])
            nps_note = "; its NPS groups take the integers 0-10 " if declared == "0-10" else " "
            more = f" and {len(outside) - 5} more" if len(outside) > 5 else ""
            errors.append({"field": "params.sentiment_from.scale",
                           "message": f"{key!r}: {len(outside)} value(s) outside the declared {declared} scale"
                                      f"{nps_note}({rows}{more})"})
    return errors


def prepare(params: ThematicParams, data: list[dict[str, Any]], earlier: EarlierResults) -> Any:
    """Submission-time checks of params against the input, and the baseline of ``compare_to``.

    Runs after the params model and ``validate_input``, so a metadata key no response carries is a 422 naming
    ``params.breakdown_by[i]`` and an unknown ``compare_to`` a 404 naming ``params.compare_to``: never a job
    that fails later.
    """
    keys, valued = _keys_of(data)
    seen = ", ".join(k for k, _ in keys.most_common(10)) or "none"
    errors: list[dict[str, str]] = []
    for i, key in enumerate(params.breakdown_by or []):
        if key not in keys:
            errors.append({"field": f"params.breakdown_by[{i}]",
                           "message": f"no response has the metadata key {key!r} (keys seen: {seen})"})
        elif key not in valued:
            # An empty column: its breakdown would be one "(missing)" group, what the key check is there to prevent.
            errors.append({"field": f"params.breakdown_by[{i}]",
                           "message": f"{key!r}: no response has a value (every one is null or empty)"})
    if (conflict := scale_conflict(params)) is not None:
        errors.append(conflict)
    errors += _sentiment_from_problems(params, data, keys, seen)
    if params.score is not None:
        key = params.score.key
        if key not in keys:
            errors.append({"field": "params.score.key",
                           "message": f"no response has the metadata key {key!r} (keys seen: {seen})"})
        elif (bad := score_problem([(item.get("metadata") or {}).get(key) for item in data], params.score.scale)):
            errors.append({"field": f"params.score.{bad[0]}", "message": f"{key!r}: {bad[1]}"})
    errors += _compare_problems(params)
    if params.sentiment == "llm" and params.sentiment_from is None and len(data) > LLM_MAX_RESPONSES:
        errors.append({"field": "params.sentiment",
                       "message": f"LLM sentiment takes at most {LLM_MAX_RESPONSES} responses; use lexicon"})
    if errors:
        raise ValidationFailed("params do not fit the input", errors)
    if params.compare_to is None:
        return data
    result = earlier.result(params.compare_to, field="params.compare_to")
    if not isinstance(result.get("themes"), list):
        raise ValidationFailed(
            "compare_to is not a thematic result",
            [{"field": "params.compare_to", "message": "the job's result has no themes"}],
        )
    baseline = baseline_of(params.compare_to, result)
    if baseline["copies"] and not params.count_duplicates:
        # "Then" counts copies and "now" would not: the shares would not be comparable (and "then" cannot be
        # recounted without them from what the earlier wave stored for its instrument).
        raise ValidationFailed("count_duplicates does not fit compare_to", [{
            "field": "params.count_duplicates",
            "message": "the compared job counted copies of an answer (count_duplicates true); a wave compared with it "
                       "must count them too"}])
    return {"responses": data, "baseline": baseline}
