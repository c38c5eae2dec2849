"""The parts of a result that follow from its assignments: sentiment per theme, breakdowns by segment, and the
comparison with an earlier wave.

They are recomputed from the document (and the responses' metadata) whenever the assignments change: at the
end of a run, and after every codebook edit (``edit.py``), so a merge or a split never leaves a stale table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from . import impact, insight, waves
from .sentiment import Scored, distribution


def primary_theme(a: Mapping[str, Any]) -> str | None:
    refs = a.get("themes") or []
    return str(refs[0]["theme_id"]) if refs else None


def _usable(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [a for a in doc.get("assignments", []) if a.get("bucket") != "unusable"]


def refresh(
    doc: dict[str, Any], metadata: Mapping[str, Mapping[str, Any] | None], *, breakdown_by: Sequence[str] | None,
    min_group_size: int = insight.MIN_GROUP_SIZE, score: Mapping[str, Any] | None = None, seed: int = 0,
) -> dict[str, Any]:
    """Recompute ``themes[].sentiment``, ``breakdowns``, ``comparison`` and ``impact`` (``score``: the job's
    ``params.score``) in place; returns ``doc``.

    ``metadata`` maps a response id (as a string) to its metadata. Themes are counted by each response's
    primary theme, the same rule as ``themes[].count``.
    """
    usable = _usable(doc)
    theme_ids = [t["id"] for t in doc.get("themes", [])]
    if doc.get("sentiment") is not None:
        by_theme: dict[str, list[Scored | None]] = {t: [] for t in theme_ids}
        for a in usable:
            t = primary_theme(a)
            if t in by_theme:
                s = a.get("sentiment")
                by_theme[t].append(Scored(s["label"], float(s["score"])) if s else None)
        for theme in doc.get("themes", []):
            theme["sentiment"] = distribution(
                by_theme.get(theme["id"], []), nps=doc["sentiment"].get("scale") == "score10"
            )
    if breakdown_by:
        doc["breakdowns"] = insight.breakdowns(
            list(breakdown_by),
            [metadata.get(str(a["response_id"])) for a in usable],
            [primary_theme(a) for a in usable],
            theme_ids,
            min_group_size=min_group_size,
        )
    else:
        doc["breakdowns"] = []
    comparison = doc.get("comparison")
    if comparison is not None:
        extra = {k: comparison[k] for k in ("mode", "instrument", "far") if k in comparison}
        doc["comparison"] = {**compare(comparison["job_id"], comparison["then"], comparison["n_then"], doc), **extra}
    if score is not None:
        key = str(score["key"])
        doc["impact"] = impact.impact(
            [(metadata.get(str(a["response_id"])) or {}).get(key) for a in usable],
            [[str(r["theme_id"]) for r in a.get("themes") or []] for a in usable],
            doc.get("themes", []), key=key, scale=score.get("scale", "numeric"), seed=seed,
        )
    return doc


def compare(job_id: str, then: Mapping[str, Mapping[str, Any]], n_then: int, doc: Mapping[str, Any]) -> dict[str, Any]:
    """Share per theme in the earlier job (``then``: id → {label, count}) and in ``doc``, with the change tested."""
    usable = _usable(doc)
    now: dict[str, int] = {t["id"]: int(t.get("count", 0)) for t in doc.get("themes", [])}
    then_counts = {k: int(v["count"]) for k, v in then.items()}
    result = insight.compare(then_counts, n_then, now, len(usable))
    groups = waves.family_tests(then_counts, n_then, now, len(usable),
                                {k: str(v["family"]) for k, v in then.items() if v.get("family")})
    labels = {t["id"]: t["label"] for t in doc.get("themes", [])}
    rows = []
    for row in result["themes"]:
        tid = row["theme_id"]
        status = "new" if tid in result["new"] else "gone" if tid in result["gone"] else "kept"
        label = labels.get(tid) or str(then.get(tid, {}).get("label", tid))
        rows.append({**row, "label": label, "count_then": int(then.get(tid, {}).get("count", 0)),
                     "count_now": now.get(tid, 0), "status": status})
    return {
        "job_id": job_id, "n_then": n_then, "n_now": len(usable), "then": {k: dict(v) for k, v in then.items()},
        "themes": rows, "new": result["new"], "gone": result["gone"], "groups": groups,
        "testing": result["testing"],
    }
