"""The parts of a result that follow from its assignments: sentiment per theme, breakdowns by segment, and the
comparison with an earlier wave.

They are recomputed from the document (and the responses' metadata) whenever the assignments change: at the
end of a run (``derived``: the render stage builds the result's sections from them), and after every codebook
edit (``refresh``: written back into the stored document), so a merge or a split never leaves a stale table.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from . import impact, insight, waves
from .sentiment import Scored, distribution


def themes_of(a: Mapping[str, Any]) -> list[str]:
    """Every theme of an assignment, primary first: one without ``multi_label``. A response counts in each of its
    themes everywhere a theme is counted (``themes[].count``, its sentiment, breakdowns, impact), so the numbers of
    one theme agree with each other and with the responses a theme filter lists."""
    return [str(r["theme_id"]) for r in a.get("themes") or []]


def _usable(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [a for a in doc.get("assignments", []) if a.get("bucket") != "unusable"]


def declared_scales(doc: Mapping[str, Any], score: Mapping[str, Any] | None = None) -> dict[str, str]:
    """The rating fields whose scale the job declared, with it: a breakdown by such a field groups it on that
    scale. ``params.sentiment_from.scale`` (read from the result, so a codebook edit's recomputation agrees), and
    ``params.score`` with the scale ``nps`` (NPS groups, as its impact reads it: inferred from the values, an
    unhappy panel's 1-5 answers were star groups and only 0s and 10s two quartile ranges). And the
    ``sentiment_from`` field whose scale was inferred as 0-10 (NPS groups): the job reads it as NPS, so its
    breakdown does too (since 2026-12-07 an undeclared 0-10 field is NPS groups only when its key names NPS)."""
    out: dict[str, str] = {}
    if score is not None and score.get("scale") == "nps":
        out[str(score["key"])] = "0-10"
    elif score is not None and score.get("scale") in impact.RANGES:
        # A declared rating range (1.7): a group per value, as a declared sentiment_from scale groups it.
        out[str(score["key"])] = str(score["scale"])
    src = doc.get("sentiment") or {}
    if src.get("source") == "metadata" and src.get("rating_range") and (
            src.get("scale_from") == "declared" or src.get("scale") == "score10"):
        out[str(src["field"])] = str(src["rating_range"])
    return out


def group_of(doc: Mapping[str, Any], metadata: Mapping[str, Mapping[str, Any] | None], field: str) -> dict[str, insight.Label]:
    """Each usable response's (by id) group in the breakdown by ``field``, as ``derived`` groups it with the job's
    ``min_group_size`` and declared scales (read from ``run.params``, as an edit reads them)."""
    params = (doc.get("run") or {}).get("params") or {}
    usable = _usable(doc)
    b = insight.groups_of(field, [metadata.get(str(a["response_id"])) for a in usable],
                          min_group_size=int(params.get("min_group_size") or insight.MIN_GROUP_SIZE),
                          scale=declared_scales(doc, params.get("score")).get(field))
    return {str(a["response_id"]): g for a, g in zip(usable, b.labels, strict=True)}


@dataclass
class Derived:
    """What follows from a document's assignments, computed without changing it (``derived``)."""

    #: Theme id → its sentiment (``themes[].sentiment``); None when the document has no sentiment.
    theme_sentiment: dict[str, dict[str, Any]] | None
    breakdowns: list[dict[str, Any]]
    #: The comparison with its rows filled; None when the document compares with no earlier wave.
    comparison: dict[str, Any] | None
    #: The themes' impact on ``params.score``; None without a score.
    impact: dict[str, Any] | None


def derived(
    doc: Mapping[str, Any], metadata: Mapping[str, Mapping[str, Any] | None], *, breakdown_by: Sequence[str] | None,
    min_group_size: int = insight.MIN_GROUP_SIZE, score: Mapping[str, Any] | None = None,
) -> Derived:
    """``themes[].sentiment``, ``breakdowns``, ``comparison`` and ``impact`` (``score``: the job's ``params.score``)
    of ``doc``, which is only read: the run builds its result from them, an edit writes them back (``refresh``).

    ``metadata`` maps a response id (as a string) to its metadata. A response counts in each of its
    themes (one without ``multi_label``), the same rule as ``themes[].count``.
    """
    usable = _usable(doc)
    theme_ids = [t["id"] for t in doc.get("themes", [])]
    theme_sentiment = None
    if doc.get("sentiment") is not None:
        by_theme: dict[str, list[Scored | None]] = {t: [] for t in theme_ids}
        for a in usable:
            s = a.get("sentiment")
            for t in themes_of(a):
                if t in by_theme:
                    by_theme[t].append(Scored(s["label"], float(s["score"])) if s else None)
        nps = doc["sentiment"].get("scale") == "score10"
        theme_sentiment = {t: distribution(by_theme.get(t, []), nps=nps) for t in theme_ids}
    breakdowns = insight.breakdowns(
        list(breakdown_by),
        [metadata.get(str(a["response_id"])) for a in usable],
        [themes_of(a) for a in usable],
        theme_ids,
        min_group_size=min_group_size,
        scales=declared_scales(doc, score),
    ) if breakdown_by else []
    comparison = doc.get("comparison")
    if comparison is not None:
        extra = {k: comparison[k] for k in ("mode", "instrument", "far", "copies") if k in comparison}
        comparison = {**compare(comparison["job_id"], comparison["then"], comparison["n_then"], doc,
                                mode=comparison.get("mode"), copies=comparison.get("copies", True)), **extra}
    impact_of = None
    if score is not None:
        key = str(score["key"])
        impact_of = impact.impact(
            [(metadata.get(str(a["response_id"])) or {}).get(key) for a in usable],
            [themes_of(a) for a in usable],
            doc.get("themes", []), key=key, scale=score.get("scale", "numeric"),
        )
    return Derived(theme_sentiment, breakdowns, comparison, impact_of)


def refresh(
    doc: dict[str, Any], metadata: Mapping[str, Mapping[str, Any] | None], *, breakdown_by: Sequence[str] | None,
    min_group_size: int = insight.MIN_GROUP_SIZE, score: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Write what ``derived`` computes into a stored document (a codebook edit's), in place; returns ``doc``."""
    d = derived(doc, metadata, breakdown_by=breakdown_by, min_group_size=min_group_size, score=score)
    if d.theme_sentiment is not None:
        for theme in doc.get("themes", []):
            theme["sentiment"] = d.theme_sentiment[theme["id"]]
    doc["breakdowns"] = d.breakdowns
    if d.comparison is not None:
        doc["comparison"] = d.comparison
    if d.impact is not None:
        doc["impact"] = d.impact
    return doc


#: Said with every discover-mode comparison (in every renderer): its two waves were not counted by one coder.
DISCOVER_WARNING: Final = (
    "compare_mode=discover: this wave's themes were found afresh and mapped onto the earlier ones by prototypes, "
    "while 'then' is the earlier clustering's count, so part of a change can be the mapping's and significance is "
    "approximate (on no-change waves it flagged unchanged themes); a gone theme is not tested. For tested "
    "changes use compare_mode=inherit.")


def compare(job_id: str, then: Mapping[str, Mapping[str, Any]], n_then: int, doc: Mapping[str, Any],
            *, mode: str | None = None, copies: bool = True) -> dict[str, Any]:
    """Share per theme in the earlier job (``then``: id → {label, count}) and in ``doc``, with the change tested.

    In discover mode a gone theme is not tested: its 0 now means no discovered theme mapped onto it, and on
    no-change waves those zeros were tested as significant falls (review38: 2 of 4 false alarms).

    ``copies`` False: the earlier wave did not count copies of an answer (it ran before schema 1.4), so this
    wave's counted copies are left out of "now" too: both shares are of distinct answers."""
    usable = [a for a in _usable(doc) if copies or a.get("duplicate_of") is None]
    now: dict[str, int] = {t["id"]: int(t.get("count", 0)) for t in doc.get("themes", [])}
    if not copies:
        now = {t: 0 for t in now} | Counter(t for a in usable for t in themes_of(a))
    then_counts = {k: int(v["count"]) for k, v in then.items()}
    discover = mode == "discover"
    gone = {k for k, c in then_counts.items() if c > 0 and now.get(k, 0) == 0} if discover else set()
    # A theme a codebook edit split in this wave (then[id].split_into) is no longer what its earlier count counted:
    # neither it nor an earlier theme that took its split-off is tested; its family is, with the split-off pooled in.
    split = {k: [str(c) for c in v["split_into"]] for k, v in then.items() if v.get("split_into")}
    untested = gone | set(split) | {c for cs in split.values() for c in cs if c in then}
    result = insight.compare(then_counts, n_then, now, len(usable), untested=untested)
    pooled = dict(now)
    for k, cs in split.items():
        pooled[k] = pooled.get(k, 0) + sum(now.get(c, 0) for c in cs if c not in then)
    groups = waves.family_tests(then_counts, n_then, pooled, len(usable),
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
        "testing": result["testing"], **({"warning": DISCOVER_WARNING} if discover else {}),
    }
