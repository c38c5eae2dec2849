"""Waves on one instrument: the earlier job's themes code the new wave, and "new" means far from all of them.

Every thematic result carries an ``instrument``: per theme its centroid (the mean embedding of its primary
members, stored as float16) and a radius (the ``RADIUS_QUANTILE`` of its members' cosine to it), and the count
of the job's own usable responses that the instrument codes to it. The instrument codes a response to its
nearest centroid if the cosine is at least ``FLOOR``, else to no theme. Both waves are counted by that same
rule, so a change in share is a change in the answers, not in how two clusterings happened to cut them
(issue 23: with "then" from wave 1's clustering and "now" from another coder, a fee theme fell 80 % and
looked unchanged, and three sub-themes of wave 1's broad themes looked new).

Compared with an earlier job (``compare_mode="inherit"``, the default), the new wave is coded against the
earlier instrument: the earlier codebook is the seed, as in Caplena's inherited topic collections. The new
wave's own themes are still discovered; one is **new** only when most of its members are far from every
earlier theme (a cosine below each earlier theme's radius) and they are at least ``new_min_far``: 10,
``min_theme_size`` or 1 % of the wave, whichever is largest. Its far
members stay in it; everything else is coded by the earlier instrument. The next wave inherits this job's
instrument: the earlier centroids unchanged, plus one per new theme.

Codebook edits move the instrument with the themes (``codebook.apply_edits``): a merge points the absorbed
theme's centroids at the surviving theme and sums the counts (exact), a delete points them at no theme
(exact: those responses are "other" in both waves), a split adds a keyword rule to the source's centroids
and moves the split's count (approximate: the moved responses were counted by the clustering, not by the
instrument).
"""

from __future__ import annotations

import base64
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from .codebook import keyword_pattern

#: Below this cosine to its nearest centroid a response is coded to no theme (the seed-code floor, assign.py).
FLOOR: Final = 0.30
#: A theme's radius: this quantile of its own members' cosine to its centroid (at most the same quantile
#: pooled over all the job's themed responses). A response below the radius of every earlier theme is "far".
#: Measured in bench/waves.py --radii (docs/thematic.md): at 0.02, 4-6 % of an unchanged Banking77 intent's
#: new answers are far on average (at most ~22 % of one intent), while an intent with no near neighbour among
#: the earlier themes is ~60 % far; at 0.05 the unchanged ones reach 6-9 % and a chance cluster of far answers
#: was called new.
RADIUS_QUANTILE: Final = 0.02
#: Radius for an instrument rebuilt from an old result's labels and quotes (no centroids stored): the median
#: of the radii measured on Banking77 and the sample (bench/waves.py --radii).
FALLBACK_RADIUS: Final = 0.45
#: A discovered theme is new when at least this share of its members is far from every earlier theme...
NEW_MAJORITY: Final = 0.5
#: ...and at least this many of them (or min_theme_size, or NEW_MIN_SHARE of the wave, if larger): a handful
#: of far answers that the clustering happened to put together is what chance makes; a new theme is more.
NEW_MIN_FAR: Final = 10
#: The far answers a new theme needs also grow with the wave: at least this share of its usable answers. Some
#: answers of every unchanged theme are far (the radius is a low quantile of wave 1's in-sample cosines), so
#: the far answers, and the chance clusters the clustering makes of them, grow with the wave; a fixed count
#: is reached more often the larger the wave. Set from the null on the tune seeds (bench/waves.py
#: --first-seed 100, no new theme planted; docs/thematic.md): at ~2,110 answers a wave the largest mostly-far
#: discovered theme held 13 far answers (0.62 %, seed 100; the other eight seeds run had none), and the fixed 10
#: flagged it. 1 % is the round share above that null, and below what an intent absent from wave 1 gives at 3 %
#: of the wave (~60 % of it far: 1.7-2.2 % of the wave in its largest discovered theme, --held-out 2).
NEW_MIN_SHARE: Final = 0.01


def pack(v: NDArray[np.float32]) -> str:
    return base64.b64encode(v.astype("<f2").tobytes()).decode("ascii")


def unpack(s: str) -> NDArray[np.float32]:
    return np.frombuffer(base64.b64decode(s), dtype="<f2").astype(np.float32)


def _unit(m: NDArray[np.float32]) -> NDArray[np.float32]:
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    out: NDArray[np.float32] = (m / np.maximum(norms, 1e-12)).astype(np.float32)
    return out


def _rounded(m: NDArray[np.float32]) -> NDArray[np.float32]:
    # Counted with the stored (float16) centroids, so the next wave's coder is exactly this one.
    return m.astype("<f2").astype(np.float32)


def centroids_of(emb: NDArray[np.float32], owner: Sequence[str | None], ids: Sequence[str]) -> NDArray[np.float32]:
    """Unit mean embedding of each theme's responses (``owner[i]``: response i's theme or None)."""
    pos = {t: j for j, t in enumerate(ids)}
    out = np.zeros((len(ids), emb.shape[1]), dtype=np.float32)
    for i, t in enumerate(owner):
        if t in pos:
            out[pos[t]] += emb[i]
    return _rounded(_unit(out))


def nearest(emb: NDArray[np.float32], cents: NDArray[np.float32]) -> tuple[NDArray[np.int64], NDArray[np.float32],
                                                                          NDArray[np.float32]]:
    """Per response: the nearest centroid, its cosine, and the full similarity matrix."""
    if cents.shape[0] == 0 or emb.shape[0] == 0:
        n = emb.shape[0]
        return np.full(n, -1, dtype=np.int64), np.zeros(n, dtype=np.float32), np.zeros((n, 0), dtype=np.float32)
    sims = (emb @ cents.T).astype(np.float32)
    j = sims.argmax(axis=1).astype(np.int64)
    return j, sims[np.arange(len(j)), j], sims


def code_with(inst: Mapping[str, Any], emb: NDArray[np.float32], texts: Sequence[str]) -> list[str | None]:
    """The theme id the instrument codes each response to (None: no theme)."""
    codes = inst["codes"]
    cents = np.stack([unpack(c["centroid"]) for c in codes]) if codes else np.zeros((0, emb.shape[1]), np.float32)
    j, best, _ = nearest(emb, cents)
    out: list[str | None] = []
    for i in range(emb.shape[0]):
        if j[i] < 0 or best[i] < float(inst.get("floor", FLOOR)):
            out.append(None)
            continue
        out.append(target(codes[int(j[i])], texts[i]))
    return out


def _rule(code: Mapping[str, Any], text: str) -> Mapping[str, Any] | None:
    """The first split rule of ``code`` whose keyword (a whole word, as codebook.Split) is in ``text``."""
    for rule in code.get("splits", []):
        if keyword_pattern(str(rule["keyword"])).search(text):
            return rule  # type: ignore[no-any-return]
    return None


def target(code: Mapping[str, Any], text: str) -> str | None:
    """The theme a response nearest ``code`` is coded to: its split rule's, else the code's (None: other)."""
    rule = _rule(code, text)
    t = rule["theme_id"] if rule is not None else code.get("theme_id")
    return None if t is None else str(t)


def build(
    emb: NDArray[np.float32], owner: Sequence[str | None], ids: Sequence[str], texts: Sequence[str], encoder: str,
    *, inherited: Sequence[Mapping[str, Any]] = (), weights: Sequence[int] | None = None,
) -> dict[str, Any]:
    """This job's instrument: the ``inherited`` codes (an earlier wave's, kept as they are) and one code per
    theme of ``ids`` that has none yet (centroid and radius from its responses), counted on this job.

    ``weights[i]``: how many responses row ``i`` stands for (itself and its counted copies; 1 each without)."""
    covered = {c["theme_id"] for c in inherited}
    fresh = [t for t in ids if t not in covered]
    cents = centroids_of(emb, owner, fresh)
    pos = {t: k for k, t in enumerate(fresh)}
    rows: dict[int, list[int]] = {}
    for i, o in enumerate(owner):
        if o in pos:
            rows.setdefault(pos[o], []).append(i)
    # A fresh code's radius: the low quantile of its own responses' cosine to its centroid, and never above the
    # same quantile pooled over all themes' responses: a small or templated theme's own spread is too tight
    # an estimate (8 near-identical answers would make every new phrasing "far").
    own = [emb[rows[k]] @ cents[k] if rows.get(k) else np.zeros(0, dtype=np.float32) for k in range(len(fresh))]
    pooled_s = np.concatenate(own) if own else np.zeros(0, dtype=np.float32)
    pooled = float(np.quantile(pooled_s, RADIUS_QUANTILE)) if len(pooled_s) >= 5 else FALLBACK_RADIUS
    r = [round(min(pooled, float(np.quantile(x, RADIUS_QUANTILE)) if len(x) >= 5 else pooled), 4) for x in own]
    codes: list[dict[str, Any]] = [dict(c) for c in inherited]
    codes += [{"theme_id": t, "centroid": pack(cents[k]), "radius": r[k], "count": 0, "splits": []}
              for k, t in enumerate(fresh)]
    inst: dict[str, Any] = {"encoder": encoder, "floor": FLOOR, "n": int(emb.shape[0]), "codes": codes}
    recount(inst, emb, texts, weights)
    return inst


def recount(inst: dict[str, Any], emb: NDArray[np.float32], texts: Sequence[str],
            weights: Sequence[int] | None = None) -> None:
    """Count, per code, the responses coded to it (splits counted under their rule's theme on the code); row
    ``i`` counts ``weights[i]`` times (a response and its counted copies)."""
    w = list(weights) if weights is not None else [1] * emb.shape[0]
    codes = inst["codes"]
    for c in codes:
        c["count"] = 0
        for rule in c.get("splits", []):
            rule["count"] = 0
    if not codes:
        return
    cents = np.stack([unpack(c["centroid"]) for c in codes])
    j, best, _ = nearest(emb, cents)
    for i in range(emb.shape[0]):
        if j[i] < 0 or best[i] < float(inst.get("floor", FLOOR)):
            continue
        c = codes[int(j[i])]
        rule = _rule(c, texts[i])
        (rule if rule is not None else c)["count"] += w[i]  # type: ignore[index]
    inst["n"] = int(sum(w))


def counts(inst: Mapping[str, Any]) -> dict[str, int]:
    """Responses per theme id under the instrument (codes that point at no theme are left out)."""
    out: Counter[str] = Counter()
    for c in inst.get("codes", []):
        if c.get("theme_id") is not None:
            out[str(c["theme_id"])] += int(c.get("count", 0))
        for rule in c.get("splits", []):
            if rule.get("theme_id") is not None:
                out[str(rule["theme_id"])] += int(rule.get("count", 0))
    return dict(out)


def from_prototypes(protos: NDArray[np.float32], baseline: Mapping[str, Any], encoder: str) -> dict[str, Any]:
    """An instrument for an earlier result that has none (written before schema 1.2): its themes' prototypes
    (baseline.prototypes), a measured fallback radius, and its clustering's counts as "then" (approximate)."""
    return {
        "encoder": encoder, "floor": FLOOR, "n": int(baseline["n"]),
        "codes": [{"theme_id": t["id"], "centroid": pack(protos[k]), "radius": FALLBACK_RADIUS,
                   "count": int(t["count"]), "splits": []} for k, t in enumerate(baseline["themes"])],
    }


def new_min_far(n: int, min_size: int) -> int:
    """The far answers a discovered theme needs to be new in a wave of ``n`` usable answers: the largest of
    ``NEW_MIN_FAR``, ``min_size`` and ``NEW_MIN_SHARE`` of the wave (rounded up)."""
    return max(NEW_MIN_FAR, int(min_size), math.ceil(NEW_MIN_SHARE * n - 1e-9))


def _centroids(codes: Sequence[Mapping[str, Any]], dims: int) -> NDArray[np.float32]:
    return np.stack([unpack(c["centroid"]) for c in codes]) if codes else np.zeros((0, dims), np.float32)


def far_from_every(sims: NDArray[np.float32], codes: Sequence[Mapping[str, Any]]) -> NDArray[np.bool_]:
    """Per response (a row of ``sims``, its cosines to the ``codes``' centroids): below every earlier theme's
    radius, so no earlier theme covers it (all of them when there is no earlier theme)."""
    if not len(codes):
        return np.ones(sims.shape[0], dtype=bool)
    radius = np.array([float(c.get("radius", FALLBACK_RADIUS)) for c in codes], dtype=np.float32)
    return np.asarray((sims < radius[None, :]).all(axis=1), dtype=bool)


def far_members(emb: NDArray[np.float32], codes: Sequence[Mapping[str, Any]]) -> NDArray[np.bool_]:
    """:func:`far_from_every` for embeddings: what :func:`inherit` calls far."""
    return far_from_every(nearest(emb, _centroids(codes, emb.shape[1]))[2], codes)


def inherit(
    emb: NDArray[np.float32], texts: Sequence[str], discovered: Sequence[str | None], earlier: Mapping[str, Any],
    *, min_size: int, weights: Sequence[int] | None = None,
) -> tuple[list[str | None], dict[str, Any]]:
    """Code this wave against the ``earlier`` instrument.

    ``discovered[i]``: response i's theme in this run's own clustering (None: other). Returns per response
    the earlier theme id it is coded to, ``""`` for no theme, or None when it stays in its discovered theme
    because that theme is new; and facts for the result (how many responses were far, which themes new).
    ``weights[i]``: the responses row ``i`` stands for in the far count (its counted copies); a new theme is
    decided on distinct answers, as the clustering found it.
    """
    codes = earlier["codes"]
    j, best, sims = nearest(emb, _centroids(codes, emb.shape[1]))
    far = far_from_every(sims, codes)
    members: dict[str, list[int]] = {}
    for i, t in enumerate(discovered):
        if t is not None:
            members.setdefault(t, []).append(i)
    new: set[str] = set()
    need = new_min_far(emb.shape[0], min_size)
    for t, rows in members.items():
        n_far = int(far[rows].sum())
        if n_far >= need and n_far >= NEW_MAJORITY * len(rows):
            new.add(t)
    floor = float(earlier.get("floor", FLOOR))
    out: list[str | None] = []
    for i in range(emb.shape[0]):
        if discovered[i] in new and far[i]:
            out.append(None)
        elif j[i] < 0 or best[i] < floor:
            out.append("")
        else:
            out.append(target(codes[int(j[i])], texts[i]) or "")
    n_far = int(far.sum()) if weights is None else int(np.asarray(weights)[far].sum())
    return out, {"far": n_far, "new_discovered": sorted(new)}


# --- families: the change tested where it was made ------------------------------------------------------------
#
# One intent of the earlier wave is often cut into two or three themes (the clustering's grain). When that intent
# doubles, its extra answers split between them: each theme moves 1-2 points, and Benjamini-Hochberg over 20-67
# themes then asks each for p ~ 0.001 (bench/waves.py: x2 found in 5 of 10 seeds). The themes of one family are
# near each other in the embedding space, so the earlier instrument alone (no answer of the new wave) groups them:
# average-linkage over the earlier themes' centroids, joined while the mean cosine is at least FAMILY_COSINE. Each
# family of two or more themes is then tested as one proportion (its members' counts pooled), with BH over the
# families. Fewer, coarser hypotheses: the pooled count has the power the single themes lack, and because the
# families are fixed before the new wave is seen, the test keeps its level (checked on null waves: bench/waves.py).

#: Themes join a family while the mean cosine between their centroids is at least this. Swept on Banking77
#: (bench/waves.py --fast --null, 10 seeds): 0.75 made 3-14 families and found nothing the per-theme tests
#: missed; 0.70 (5-18 families) found one more x2 change (7/10 against 6/10) with no false alarm in the planted
#: or the null waves; 0.65 found no more than the per-theme tests.
FAMILY_COSINE: Final = 0.7


def theme_centroids(codes: Sequence[Mapping[str, Any]]) -> tuple[list[str], NDArray[np.float32]]:
    """One unit centroid per theme id of ``codes`` (the mean of its codes' centroids: a merge leaves several)."""
    acc: dict[str, NDArray[np.float32]] = {}
    for c in codes:
        t = c.get("theme_id")
        if t is None:
            continue
        v = unpack(str(c["centroid"]))
        acc[str(t)] = acc[str(t)] + v if str(t) in acc else v.copy()
    ids = list(acc)
    m = np.stack([acc[t] for t in ids]) if ids else np.zeros((0, 0), np.float32)
    return ids, (_unit(m) if ids else m)


def families(codes: Sequence[Mapping[str, Any]], threshold: float = FAMILY_COSINE) -> dict[str, str]:
    """Theme id -> family key (the smallest member id by sort order), from the earlier instrument's centroids only.

    Average linkage: repeatedly join the two clusters with the highest mean pairwise cosine while it is at least
    ``threshold``. Deterministic (ties broken by position). Themes alone in their family map to themselves.
    """
    ids, cents = theme_centroids(codes)
    n = len(ids)
    if n == 0:
        return {}
    sims = (cents @ cents.T).astype(np.float64)
    clusters: list[list[int]] = [[i] for i in range(n)]
    # Sum of pairwise cosines between clusters a and b (average = sum / (|a| |b|)); updated on each join.
    total = sims.copy()
    alive = list(range(n))
    while len(alive) > 1:
        best, pair = -2.0, (-1, -1)
        for x in range(len(alive)):
            a = alive[x]
            for y in range(x + 1, len(alive)):
                b = alive[y]
                avg = total[a, b] / (len(clusters[a]) * len(clusters[b]))
                if avg > best:
                    best, pair = avg, (a, b)
        if best < threshold:
            break
        a, b = pair
        clusters[a] += clusters[b]
        clusters[b] = []
        total[a, :] += total[b, :]
        total[:, a] += total[:, b]
        alive.remove(b)
    out: dict[str, str] = {}
    for a in alive:
        members = sorted((ids[i] for i in clusters[a]), key=_id_order)
        for t in members:
            out[t] = members[0]
    return out


def _id_order(t: str) -> tuple[int, str]:
    digits = re.sub(r"\D", "", t)
    return (int(digits) if digits else 1 << 30, t)


def family_tests(
    then: Mapping[str, int], n_then: int, now: Mapping[str, int], n_now: int, family_of: Mapping[str, str],
    *, alpha: float = 0.05, weighted: bool = False,
) -> list[dict[str, Any]]:
    """Per family of two or more earlier themes (members present in ``then``): pooled shares then and now, the
    two-proportion test of the change, and BH q over the families (``weighted=True``: weighted BH, weights from
    each family's pooled count over both waves as insight.compare's; evaluated, not the default). New themes
    belong to no family."""
    from .insight import change_test, pooled_weights, weighted_benjamini_hochberg

    groups: dict[str, list[str]] = {}
    for t in then:
        f = family_of.get(t)
        if f is not None:
            groups.setdefault(f, []).append(t)
    rows: list[dict[str, Any]] = []
    for key in sorted(groups, key=_id_order):
        members = sorted(groups[key], key=_id_order)
        if len(members) < 2:
            continue
        a, b = sum(int(then[t]) for t in members), sum(int(now.get(t, 0)) for t in members)
        s_then, s_now = (a / n_then if n_then else 0.0), (b / n_now if n_now else 0.0)
        p, test = change_test(b, n_now, a, n_then)
        rows.append({"family": key, "theme_ids": members, "count_then": a, "count_now": b,
                     "share_then": round(s_then, 4), "share_now": round(s_now, 4),
                     "change": round(s_now - s_then, 4), "p": p, "test": test})
    weights = (pooled_weights([int(r["count_then"]) + int(r["count_now"]) for r in rows]) if weighted
               else [1.0] * len(rows))
    for row, q, w in zip(rows, weighted_benjamini_hochberg([float(r["p"]) for r in rows], weights), weights,
                         strict=True):
        row["q"] = round(q, 4)
        row["significant"] = q < alpha
        row["p"] = round(float(row["p"]), 6)
        row["weight"] = round(w, 4)
    return rows
