"""From themes to insight: breakdowns by segment and change between waves, with honest statistics.

Pure functions over the per-response theme assignments and metadata; the pipeline
adds their output to the result document. The tests are a two-proportion z-test per
(group, theme) cell against the rest of the responses (Fisher's exact test where an
expected count is below ``MIN_EXPECTED``: ``change_test``), and Benjamini–Hochberg over
all the cells of one breakdown (or one comparison), so that "significant" keeps the
expected share of false discoveries at ``alpha`` however many cells a table has.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final


class Synthetic(Enum):
    """A breakdown group Thematiq made, not a value a researcher submitted: the responses without a value, and the
    pool of rare values. An Enum member equals no string, so a real value that is literally "(missing)" or "other
    values" stays its own group (issue 23: before 2026-12-07 they were strings and the real value merged with the
    synthetic group of that name). In the result a synthetic group has ``synthetic`` "missing" / "other"."""

    MISSING = "(missing)"
    OTHER = "other values"


MISSING: Final = Synthetic.MISSING
OTHER_VALUES: Final = Synthetic.OTHER
#: A group's label: a real value (its text) or a synthetic group.
Label = str | Synthetic
#: ``breakdowns[].groups[].synthetic`` of each synthetic group (schema 1.6).
SYNTHETIC_KEY: Final = {Synthetic.MISSING: "missing", Synthetic.OTHER: "other"}


def synthetic_of(group: Mapping[str, Any]) -> str | None:
    """A result's breakdown group's ``synthetic`` ("missing", "other" or None). A document before schema 1.6 has none:
    its groups named "(missing)" and "other values" are taken as the synthetic ones, as they were made."""
    if "synthetic" in group:
        return None if group["synthetic"] is None else str(group["synthetic"])
    return {MISSING.value: "missing", OTHER_VALUES.value: "other"}.get(str(group.get("value")))


def heading(group: Mapping[str, Any]) -> str:
    """A breakdown group as a table heading shows it: a synthetic group by its name, "(missing)" or "other values"; a
    real value as it is, unless it could be read as a synthetic group's name ("(missing)", "other values", or either
    in double quotes, however many): then in double quotes, so every group reads differently from every other."""
    value = str(group.get("value"))
    names = (MISSING.value, OTHER_VALUES.value)
    synthetic = synthetic_of(group)
    if synthetic is not None:
        return {"missing": MISSING.value, "other": OTHER_VALUES.value}.get(synthetic, value)
    return f'"{value}"' if value.strip('"') in names else value
#: Groups smaller than this are pooled as "other values": a share of 3 responses says nothing.
MIN_GROUP_SIZE = 20
MAX_BREAKDOWN_FIELDS = 5
MAX_GROUPS = 12
ALPHA = 0.05
#: A breakdown cell is tested for significance only when its group and the rest each have at least this many
#: usable responses; a smaller group is ``small_n``: its cells keep their count, share, lift and p (the exact test,
#: valid at any n) but are left out of the Benjamini-Hochberg family (q null) and are never significant. Fisher's
#: exact test is valid at n = 1, yet one answer in a 5-of-1,000 theme is p = 0.005 (review43: a ``(missing)`` group
#: of one answer was "significant", lift x250): a difference that rests on a handful of answers is no segment
#: finding. Leaving them out of BH is valid (a group's size is a margin of its tables, independent of the test
#: under the null: independent filtering, Bourgon, Gentleman & Huber 2010) and makes the other cells' BH less strict.
#: 10 as ``impact.MIN_N``; bench/segments.py measures the rule on null and planted segments (docs/thematic.md).
MIN_TESTED_N: Final = 10


@dataclass(frozen=True)
class Bucketing:
    """How a metadata field's values became groups."""

    kind: str  # "categorical" | "nps" | "numeric"
    labels: list[Label]  # one per response


def meta_text(value: Any) -> str:
    """A metadata value as a filter compares it (and a spreadsheet shows it): 7, "7" and 7.0 are all "7"; a list or
    an object is its JSON."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list | dict):
        return json.dumps(value, ensure_ascii=False)  # as written, in JSON (str() gave Python's repr)
    return str(value)


def finite(v: Any) -> float | None:
    """A JSON number as a finite float, or None: not a bool, NaN or infinity, nor an integer too large for a
    float (JSON allows 10**400; ``float()`` of it raises OverflowError)."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    try:
        x = float(v)
    except OverflowError:
        return None
    return x if math.isfinite(x) else None


def number(value: Any) -> float | None:
    """A rating or score as a number: a finite JSON number, or a string that reads as one (a spreadsheet's cell,
    as the CLI sends a CSV's: "7", " 7 ", "1e3"); else None. ``params.score`` and ``params.sentiment_from`` read
    values by this one rule (before 2026-12-07 the score took "7" and sentiment_from refused it). A breakdown
    still groups strings as categories (a postal code "02139" is no number)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return finite(value)
    if isinstance(value, str) and value.strip():
        if "_" in value:
            return None  # float() reads Python's "1_0" as 10; a spreadsheet cell "1_0" is no number
        try:
            x = float(value.strip())
        except ValueError:
            return None
        return x if math.isfinite(x) else None
    return None


def _is_number(v: Any) -> bool:
    return finite(v) is not None


def _nps_group(v: Any) -> Label:
    if v is None or v == "":
        return MISSING
    n = float(v)
    return "detractor" if n <= 6 else "passive" if n <= 8 else "promoter"


#: A metadata key that names a likelihood-to-recommend score: "nps", "NPS score", "nps_2026", "Net Promoter",
#: "How likely are you to recommend us?". Only such a key's integer 0-10 values are read as NPS groups without a
#: declaration (``bucket``); "orders last year" or "years as a customer" (0-10 integers too) are numbers.
NPS_KEY_RE: Final = re.compile(r"(?<![a-z0-9])nps(?![a-z])|net[\s_-]*promoter|recommend", re.IGNORECASE)


def names_nps(key: str | None) -> bool:
    """Whether a metadata key names an NPS (likelihood-to-recommend) question (``NPS_KEY_RE``)."""
    return key is not None and NPS_KEY_RE.search(key) is not None


#: A categorical group's label is its value's first this many characters (or more, to tell it from another value:
#: ``_distinct_cuts``); the responses route's metadata filter reads a value of at least this length that no response
#: has whole as such a label, the prefix of its group's values (verbatims).
GROUP_LABEL_CHARS = 80
#: An integer field with at most this many distinct values is grouped by value, as a 1-5 rating is (review44r: a 0/1
#: flag read as the ranges "0–0" and "1–1" once the CLI sent number columns as numbers).
FEW_VALUES = 5


def bucket(values: Sequence[Any], scale: str | None = None, key: str | None = None) -> Bucketing:
    """Groups for one field: categories as they are; a 1–5 integer rating by its values; an NPS score as
    detractor/passive/promoter; other numbers in quartile ranges; missing values as ``(missing)``.

    ``scale`` is a declared rating range (``params.sentiment_from.scale`` of this field, or "0-10" for the
    ``params.score`` key of scale nps), which wins over the values: "0-10" is NPS groups even when the answers
    happen to lie in 1-5 (inferred, they were a group per value, as stars), a 0-5, 1-5, 1-7 or 1-10 rating a group
    per value (a 1-10 rating's values are not NPS groups) when its values are the rating's points (integers); averages
    on such a range are grouped as other numbers are (quartile ranges; review46m: a group each was one "other
    values" group). Undeclared, integers in 0-10 with more than two values
    are NPS groups only when the field's ``key`` names NPS (``names_nps``); before 2026-12-07 any such field was
    (orders last year: 0-6 orders "detractors"), now it is quartile ranges like any other number."""
    if scale == "0-10":
        return Bucketing("nps", [_nps_group(v) for v in values])
    present = [v for v in values if v is not None and v != ""]
    if scale is not None:
        nums_read = [number(v) for v in present]
        if all(n is not None and n.is_integer() for n in nums_read):
            return Bucketing("categorical", [MISSING if v is None or v == "" else meta_text(v) for v in values])
        # A declared range's points are a group per value; averages on it (7.3 on 1-10, which a declared score or
        # sentiment_from scale takes, "7.3" too, read as the job reads them) are grouped as any numbers below: a
        # group each was 300 groups of one, all pooled as "other values" (review46m).
        if all(n is not None for n in nums_read):
            values = [v if v is None or v == "" else number(v) for v in values]
            present = [v for v in values if v is not None and v != ""]
    if present and all(_is_number(v) for v in present):
        nums = [float(v) for v in present]
        whole = all(n.is_integer() for n in nums)
        if whole and min(nums) >= 1 and max(nums) <= 5:
            # A 1-5 rating (stars, CSAT; what sentiment_from reads as stars): a group per value. As NPS groups
            # every answer was a "detractor", one group, so the breakdown showed nothing.
            return Bucketing("categorical", [MISSING if v is None or v == "" else meta_text(v) for v in values])
        if min(nums) >= 0 and max(nums) <= 10 and whole and len(set(nums)) > 2 and names_nps(key):
            return Bucketing("nps", [_nps_group(v) for v in values])
        if whole and len(set(nums)) <= FEW_VALUES and max(map(abs, nums)) < 2 ** 53:  # codes, not 1e20s
            # A 0/1 flag, a yes/no/maybe code, a field of a handful of values: a group per value. Their quartile
            # ranges were the values themselves written as ranges ("0–0", "1–1"), or merged two of them.
            return Bucketing("categorical", [MISSING if v is None or v == "" else meta_text(v) for v in values])
        edges = _quartile_edges(sorted(nums))
        fmt = _edge_format({x for e in edges for x in e})

        def rng(v: Any) -> Label:
            if v is None or v == "":
                return MISSING
            n = float(v)
            lo, hi = next((e for e in edges if n <= e[1]), edges[-1])
            # A range of one value (7 distinct ages 30-36: a quartile holds only 36) reads "36", not "36–36"
            # (review46). Two edges never print alike (_edge_format), so equal text is one value.
            return fmt(lo) if fmt(lo) == fmt(hi) else f"{fmt(lo)}–{fmt(hi)}"

        return Bucketing("numeric", [rng(v) for v in values])
    # Labelled as the responses route's metadata[KEY]= filter writes a value (true, a list as its JSON), so a
    # group's label finds its responses; str() gave Python's syntax (['a', 'b'], True).
    texts = [None if v is None or v == "" else meta_text(v) for v in values]
    cut = _distinct_cuts({t for t in texts if t is not None})
    return Bucketing("categorical", [MISSING if t is None else cut.get(t, t) for t in texts])


#: The longest label a long value's group gets: the most the responses route's filter takes (MAX_FILTER_CHARS,
#: shared/api/responses.py; a test holds them equal). Two values alike in their first this many characters share
#: a group, the one merge left.
MAX_LABEL_CHARS: Final = 200


def _distinct_cuts(texts: set[str]) -> dict[str, str]:
    """A label for each value longer than ``GROUP_LABEL_CHARS``: its first 80 characters, or as many more as tell it
    from every other value of the field (up to ``MAX_LABEL_CHARS``). At a fixed 80, two answers alike in their first
    80 characters were one group (review43), and the filter could not tell them apart either. The label is no other
    value's prefix, so the filter's prefix rule (verbatims) finds exactly its group."""
    ordered = sorted(texts)
    out: dict[str, str] = {}
    for i, t in enumerate(ordered):
        if len(t) <= GROUP_LABEL_CHARS:
            continue
        common = max((_common_prefix(t, ordered[j]) for j in (i - 1, i + 1) if 0 <= j < len(ordered)), default=0)
        out[t] = t[:min(MAX_LABEL_CHARS, max(GROUP_LABEL_CHARS, common + 1))]
    return out


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _quartile_edges(nums: list[float]) -> list[tuple[float, float]]:
    qs = sorted({nums[min(len(nums) - 1, int(len(nums) * q))] for q in (0.25, 0.5, 0.75)} | {nums[-1]})
    edges, lo = [], nums[0]
    for hi in qs:
        if hi < lo:
            continue
        edges.append((lo, hi))
        lo = next((n for n in nums if n > hi), hi)
    return edges


def _edge_format(values: set[float]) -> Callable[[float], str]:
    """How a field's range edges are printed: to 3 significant digits, or as many more as tell every two edges apart
    (and, below 1e16, never fewer than the integer digits, so 99999.5 is not "1e+05"). At a fixed 3 the quartiles of
    order values 1000.00-1004.99 were all "1e+03–1e+03": four ranges, one label, one group."""
    for digits in range(3, 18):
        def fmt(x: float, digits: int = digits) -> str:
            if x.is_integer() and abs(x) < 1e16:
                return str(int(x))
            whole = len(str(int(abs(x)))) if 1 <= abs(x) < 1e16 else 0
            return f"{x:.{max(digits, whole + 1)}g}"

        if len({fmt(x) for x in values}) == len(values):
            return fmt
    return repr


def pool_small(labels: list[Label], min_size: int = MIN_GROUP_SIZE, max_groups: int = MAX_GROUPS) -> list[Label]:
    """Groups under ``min_size`` (and beyond the ``max_groups`` largest) become ``other values``; ``(missing)`` stays."""
    sizes = Counter(labels)
    # (missing) is never pooled with real values, even when 12 larger groups leave it out of the largest.
    keep = {g for g, n in sizes.most_common(max_groups) if n >= min_size} | {MISSING}
    return [g if g in keep else OTHER_VALUES for g in labels]


def two_proportion_p(x1: int, n1: int, x2: int, n2: int) -> float:
    """Two-sided p-value of the pooled two-proportion z-test (normal approximation)."""
    if n1 == 0 or n2 == 0:
        return 1.0
    p = (x1 + x2) / (n1 + n2)
    se = math.sqrt(p * (1 - p) * (1 / n1 + 1 / n2))
    if se == 0:
        return 1.0
    z = (x1 / n1 - x2 / n2) / se
    return math.erfc(abs(z) / math.sqrt(2))


#: Cochran's rule for a 2x2 table: the z-test's normal approximation is used only when every expected count
#: (then/now, or group/rest, × in/out of the theme, under one pooled share) is at least this; below it the
#: comparison or breakdown cell uses Fisher's exact test. Waves of a few hundred answers have themes of 1-8
#: answers, and a 40-answer segment has cells of 0-3, where z is anticonservative (bench/small_n.py).
MIN_EXPECTED: Final = 5.0


def fisher_exact_p(x1: int, n1: int, x2: int, n2: int) -> float:
    """Two-sided p of Fisher's exact test of x1/n1 against x2/n2: the hypergeometric probability of every table
    with the same margins that is no more likely than the observed one (the usual two-sided definition)."""
    k, n = x1 + x2, n1 + n2
    if n1 == 0 or n2 == 0 or k == 0 or k == n:
        return 1.0

    def log_p(x: int) -> float:  # P(X = x), X ~ Hypergeometric(n, k, n1)
        return (math.lgamma(k + 1) - math.lgamma(x + 1) - math.lgamma(k - x + 1)
                + math.lgamma(n - k + 1) - math.lgamma(n1 - x + 1) - math.lgamma(n - k - n1 + x + 1)
                - math.lgamma(n + 1) + math.lgamma(n1 + 1) + math.lgamma(n2 + 1))

    observed = log_p(x1)
    # A relative tolerance, as R's fisher.test: tables as likely as the observed one up to rounding count too.
    total = sum(math.exp(lp) for x in range(max(0, k - n2), min(k, n1) + 1)
                if (lp := log_p(x)) <= observed + 1e-7)
    return min(1.0, total)


def change_test(x1: int, n1: int, x2: int, n2: int) -> tuple[float, str]:
    """Two-sided p of x1/n1 against x2/n2 and the test that made it: the pooled z-test (``"z"``), or Fisher's
    exact test (``"fisher"``) when an expected count is below ``MIN_EXPECTED``."""
    k, n = x1 + x2, n1 + n2
    if n1 == 0 or n2 == 0:
        return 1.0, "z"
    smallest = min(n1, n2) * min(k, n - k) / n
    if smallest < MIN_EXPECTED:
        return fisher_exact_p(x1, n1, x2, n2), "fisher"
    return two_proportion_p(x1, n1, x2, n2), "z"


def benjamini_hochberg(pvalues: Sequence[float]) -> list[float]:
    """BH-adjusted q-values, in the input's order: weighted BH with every weight 1."""
    return weighted_benjamini_hochberg(pvalues, [1.0] * len(pvalues))


# --- weighted BH for the comparison of two waves ----------------------------------------------------------------
#
# With 30-70 earlier themes, plain BH asks a doubled theme (32 -> 58 of ~1,200, p ~ 0.006) for p ~ 0.002
# (bench/waves.py). Weighted BH (Genovese, Roeder & Wasserman 2006, Biometrika 93:509) rejects on p_i / w_i with
# weights w_i >= 0 of mean 1 that do not depend on the null p-values, and keeps FDR <= alpha. The weights here are
# a function of each theme's *pooled* count over both waves, N_i = then + now: under H0 (one share in both waves)
# the count now given N_i is hypergeometric whatever the share, so the two-proportion test's p-value is (up to the
# normal approximation) uniform given N_i and independent of the weight, the same argument as independent
# filtering on the pooled mean (Bourgon, Gentleman & Huber 2010, PNAS 107:9546). Weights from the wave-1 count
# alone would not be independent: a theme counted high in wave 1 by chance is more likely to "fall".
# Larger themes get more weight because the test's power for a given relative change grows with N.
#
# Evaluated, not the default (compare(weighted=False)): on the check seeds 0-9 it lost a -80 % change that plain
# BH found (a fall shrinks the pooled count, so a falling theme loses weight) and found no more x2 changes; on the
# tune seeds it found one more (docs/thematic.md, "Waves"). A trade between falls and rises, not a gain.

#: w_i proportional to N_i ** WEIGHT_POWER (normalised to mean 1 over the tested themes). Chosen on the tune
#: seeds 100-109 of bench/waves.py --fast --null (Banking77): powers 1 and 1.5 found no more than plain BH, 2 and
#: 2.5 one more x2 change (7/10 against 6/10), 3 two more, 4 lost two of the -80 % changes; 2 is the middle of the
#: range that gains without losing, not the edge. No false alarm on planted or null waves at any of them.
WEIGHT_POWER = 2.0


def pooled_weights(pooled: Sequence[int], power: float = WEIGHT_POWER) -> list[float]:
    """Weighted-BH weights from pooled counts (then + now): N ** power, scaled to mean 1 (all 1 when all are 0)."""
    raw = [float(max(0, n)) ** power for n in pooled]
    total = sum(raw)
    return [r * len(raw) / total for r in raw] if total > 0 else [1.0] * len(raw)


def weighted_benjamini_hochberg(pvalues: Sequence[float], weights: Sequence[float]) -> list[float]:
    """Weighted BH q-values (Genovese, Roeder & Wasserman 2006): BH on p_i / w_i, in the input's order.

    q_i < alpha exactly for the hypotheses the weighted step-up procedure at level alpha rejects. A weight of 0
    never rejects (q = 1). With all weights 1 this is ``benjamini_hochberg``."""
    assert len(pvalues) == len(weights)
    m = len(pvalues)
    ratio = [p / w if w > 0 else math.inf for p, w in zip(pvalues, weights, strict=True)]
    order = sorted(range(m), key=lambda i: ratio[i])
    q = [1.0] * m
    running = math.inf
    for rank in range(m, 0, -1):
        i = order[rank - 1]
        running = min(running, ratio[i] * m / rank)
        q[i] = min(1.0, running)
    return q


_NPS_ORDER: Final = {"detractor": 0, "passive": 1, "promoter": 2}
#: A group's label that starts with a number: "4" (a 1-5 rating), "0–2" (a quartile range).
_LEADING_NUMBER_RE: Final = re.compile(r"^-?[0-9]+(?:\.[0-9]+)?(?:e[-+]?[0-9]+)?(?=–|$)")


def _on_scale(value: str) -> float | None:
    """A group's place on its scale: NPS groups in order, a number or a range by its (lower) number."""
    if value in _NPS_ORDER:
        return float(_NPS_ORDER[value])
    m = _LEADING_NUMBER_RE.match(value)
    return float(m.group(0)) if m else None


def _group_order(sizes: Counter[Label]) -> list[tuple[Label, int]]:
    """The columns of a breakdown: groups that all lie on a scale (NPS groups, a 1-5 rating's values, quartile
    ranges) in its order, other categories largest first; the synthetic "(missing)" and "other values" last (a real
    value of that text is a category like any other). By size, a rating's columns read 3, 2, 1, 4, 5 and the
    quartiles came in any order."""
    places = {g: _on_scale(g) for g in sizes if isinstance(g, str)}
    by_scale = bool(places) and all(p is not None for p in places.values())

    def key(kv: tuple[Label, int]) -> tuple[Any, ...]:
        g, n = kv
        if isinstance(g, Synthetic):
            return (True, 0.0, list(Synthetic).index(g), "")
        return (False, (places.get(g) or 0.0) if by_scale else -n, 0, g)

    return sorted(sizes.items(), key=key)


def breakdown(
    field: str, groups: Sequence[Label], theme_of: Sequence[str | Sequence[str] | None], themes: Sequence[str], *,
    kind: str, alpha: float = ALPHA, min_tested_n: int = MIN_TESTED_N,
) -> dict[str, Any]:
    """Per group: its size, and per theme the count, share, lift against the rest, p (and the ``test`` that made
    it: ``change_test``, the z-test or Fisher's exact test for a small cell), BH q and significance; and the
    breakdown's ``testing`` (the procedure, as a comparison states it, and its ``min_n``).

    A group with fewer than ``min_tested_n`` responses, or whose rest has fewer, is ``small_n``: its cells have
    their p but are not in the BH family (``q`` None) and never ``significant`` (``MIN_TESTED_N``).

    ``theme_of[i]`` is response i's theme, or its themes (``multi_label``: it counts in each, as in
    ``themes[].count``); None or empty for responses in no theme (they count in ``n``).
    """
    assert len(groups) == len(theme_of)
    total = len(groups)
    sizes = Counter(groups)
    per_group: dict[Label, Counter[str]] = {g: Counter() for g in sizes}
    overall: Counter[str] = Counter()
    for g, of in zip(groups, theme_of, strict=True):
        for t in (of,) if isinstance(of, str) else (of or ()):
            per_group[g][t] += 1
            overall[t] += 1
    cells: list[dict[str, Any]] = []
    out_groups: list[dict[str, Any]] = []
    for g, n in _group_order(sizes):
        small = min(n, total - n) < min_tested_n
        rows = []
        for t in themes:
            x = per_group[g][t]
            rest_x, rest_n = overall[t] - x, total - n
            share = x / n if n else 0.0
            rest_share = rest_x / rest_n if rest_n else 0.0
            lift = share / rest_share if rest_share > 0 else (math.inf if share > 0 else 1.0)
            # A small group's cells (a 40-answer segment: expected counts of 0-3 for most themes) are where the
            # z-test's normal approximation is anticonservative: the exact test there (bench/small_n.py, part 3).
            p, test = change_test(x, n, rest_x, rest_n)
            cell: dict[str, Any] = {"theme_id": t, "count": x, "share": round(share, 4),
                    "lift": round(lift, 3) if math.isfinite(lift) else None, "p": p, "test": test}
            rows.append(cell)
            if small:
                cell.update(p=round(float(p), 6), q=None, significant=False)
            else:
                cells.append(cell)
        synthetic = SYNTHETIC_KEY[g] if isinstance(g, Synthetic) else None
        out_groups.append({"value": g.value if isinstance(g, Synthetic) else g, "n": n, "themes": rows,
                           "small_n": small, "synthetic": synthetic})
    for cell, q in zip(cells, benjamini_hochberg([float(c["p"]) for c in cells]), strict=True):
        cell["q"] = round(q, 4)
        cell["significant"] = q < alpha
        cell["p"] = round(float(cell["p"]), 6)
    return {"field": field, "kind": kind, "groups": out_groups,
            "testing": {**testing(weighted=False), "min_n": min_tested_n}}


def breakdowns(
    fields: Sequence[str], metadata: Sequence[Mapping[str, Any] | None],
    theme_of: Sequence[str | Sequence[str] | None],
    themes: Sequence[str], *, min_group_size: int = MIN_GROUP_SIZE, scales: Mapping[str, str] | None = None,
    min_tested_n: int = MIN_TESTED_N,
) -> list[dict[str, Any]]:
    """One breakdown per field; ``scales``: a declared rating range per field (``bucket``); ``min_tested_n``: see
    ``breakdown`` (0 tests every group, as before 2026-12-07: bench/segments.py's "before")."""
    out = []
    for f in fields:
        b = groups_of(f, metadata, min_group_size=min_group_size, scale=(scales or {}).get(f))
        out.append(breakdown(f, b.labels, theme_of, themes, kind=b.kind, min_tested_n=min_tested_n))
    return out


def groups_of(field: str, metadata: Sequence[Mapping[str, Any] | None], *, min_group_size: int = MIN_GROUP_SIZE,
              scale: str | None = None) -> Bucketing:
    """Each response's group in the breakdown by ``field`` (``bucket``, then ``pool_small``): what ``breakdowns``
    counts, and what the responses route's ``missing``/``other_values`` filters read (verbatims)."""
    b = bucket([(m or {}).get(field) for m in metadata], scale, key=field)
    return Bucketing(b.kind, pool_small(b.labels, min_group_size))


def testing(weighted: bool) -> dict[str, Any]:
    """How a comparison's themes (and families), or a breakdown's cells (always plain BH), were tested, for the
    result: a researcher reads which procedure made "significant" and why a large theme's threshold is looser
    than a small one's."""
    exact = {"exact_below": MIN_EXPECTED}  # a row's `test` is "fisher" when an expected count is below this
    if not weighted:
        return {"procedure": "bh", "weights": None, "alpha": ALPHA,
                "reference": "Benjamini & Hochberg 1995, J. R. Stat. Soc. B 57:289", **exact}
    return {"procedure": "weighted-bh", "weights": f"pooled count (then + now) ** {WEIGHT_POWER:g}, mean 1",
            "alpha": ALPHA, "reference": "Genovese, Roeder & Wasserman 2006, Biometrika 93:509", **exact}


def compare(
    then: Mapping[str, int], then_n: int, now: Mapping[str, int], now_n: int, *, alpha: float = ALPHA,
    weighted: bool = False, untested: Collection[str] = frozenset(),
) -> dict[str, Any]:
    """Theme shares in an earlier wave and now: change, significance (BH over the tested themes), new and gone.

    A theme of the earlier codebook (a key of ``then``, even with a count of 0) is tested: its share then
    against its share now, both counted by one instrument, with BH over these themes (``weighted=True``:
    weighted BH with weights from the pooled counts, ``pooled_weights``; evaluated in bench/waves.py, not the
    default). Each tested row carries its ``weight`` (1 under plain BH). A theme that is not in ``then`` is new: it has no earlier share to test against (a
    share of 0 is not a measurement of it), so its ``p``, ``q``, ``change`` and ``weight`` are None and it never
    counts as significant (issue 23). Themes in ``untested`` (discover mode's gone themes) are treated the same:
    their count now is what the mapping did not find, not a measurement.
    """
    ids = list(dict.fromkeys([*now, *then]))
    rows: list[dict[str, Any]] = []
    for t in ids:
        a, b = then.get(t, 0), now.get(t, 0)
        known = t in then and t not in untested
        p, test = change_test(b, now_n, a, then_n) if known else (None, None)
        rows.append({
            "theme_id": t,
            "share_then": round(a / then_n, 4) if then_n else 0.0,
            "share_now": round(b / now_n, 4) if now_n else 0.0,
            "p": p,
            "test": test,
        })
    tested = [r for r in rows if r["p"] is not None]
    weights = (pooled_weights([then.get(r["theme_id"], 0) + now.get(r["theme_id"], 0) for r in tested])
               if weighted else [1.0] * len(tested))
    qs = weighted_benjamini_hochberg([float(r["p"]) for r in tested], weights)
    for row, q, w in zip(tested, qs, weights, strict=True):
        row["change"] = round(float(row["share_now"]) - float(row["share_then"]), 4)
        row["q"] = round(q, 4)
        row["significant"] = q < alpha
        row["p"] = round(float(row["p"]), 6)
        row["weight"] = round(w, 4)
    for row in rows:
        if row["p"] is None:
            row.update(change=None, q=None, significant=False, weight=None)
    return {
        "testing": testing(weighted),
        "themes": rows,
        "new": [t for t in ids if t not in then and now.get(t, 0) > 0],
        "gone": [t for t in ids if t in then and now.get(t, 0) == 0 and then.get(t, 0) > 0],
    }
