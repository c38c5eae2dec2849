"""Breakdowns: a group of a handful of answers is marked ``small_n`` and never significant (stats44, review43).

Fisher's exact test is valid at n = 1, yet one answer in a 5-of-1,000 theme is p = 0.005: a ``(missing)`` group of
one answer was "significant" with a lift of x250. A group (or its rest) below ``insight.MIN_TESTED_N`` keeps its
counts and p, is left out of the Benjamini-Hochberg family (q null) and is never significant.
"""

from __future__ import annotations

import random

from pipelines.thematic import insight
from pipelines.thematic.result import Breakdown


def _cell(result: dict, group: insight.Label, theme: str) -> dict:
    value = group.value if isinstance(group, insight.Synthetic) else group
    g = next(x for x in result["groups"] if x["value"] == value)
    return next(c for c in g["themes"] if c["theme_id"] == theme)


def _group(result: dict, group: insight.Label) -> dict:
    value = group.value if isinstance(group, insight.Synthetic) else group
    return next(x for x in result["groups"] if x["value"] == value)


def test_a_missing_group_of_one_answer_is_small_and_not_significant() -> None:
    # 1,000 answers; the one answer without a value is in t1, a theme of 5. Fisher's two-sided p by hand:
    # P(X = 1), X ~ Hypergeometric(1000, 5, 1) = 5 / 1000 = 0.005 (the only other table, X = 0, is likelier).
    # Before: q = 0.005 (two cells with that p), significant, lift 1 / (4 / 999) = 249.75.
    groups = ["a"] * 999 + [insight.MISSING]
    themes = ["t1"] * 4 + ["t2"] * 995 + ["t1"]
    out = insight.breakdown("region", groups, themes, ["t1", "t2"], kind="categorical")
    cell = _cell(out, insight.MISSING, "t1")
    assert cell["p"] == 0.005 and cell["test"] == "fisher" and cell["lift"] == 249.75
    assert cell["q"] is None and cell["significant"] is False
    # Its rest is the other group: "a" (999 answers) is tested against one answer, so it is small too.
    assert _group(out, insight.MISSING)["small_n"] and _group(out, "a")["small_n"]
    assert not any(c["significant"] for g in out["groups"] for c in g["themes"])
    assert out["testing"]["min_n"] == insight.MIN_TESTED_N == 10
    Breakdown.model_validate(out)  # q null and small_n are in the schema (1.5)


def test_small_groups_leave_the_bh_family_and_the_rest_is_adjusted_over_the_tested_cells_only() -> None:
    # Groups a (40), b (40), tiny (3); themes t1, t2. The tested cells are a/t1, a/t2, b/t1, b/t2 (m = 4), their q
    # BH over those four p-values alone (by hand: q_(i) = min over j >= i of p_(j) * 4 / j).
    groups = ["a"] * 40 + ["b"] * 40 + ["tiny"] * 3
    themes = (["t1"] * 30 + ["t2"] * 10) + (["t1"] * 10 + ["t2"] * 30) + ["t1", "t1", "t1"]
    out = insight.breakdown("plan", groups, themes, ["t1", "t2"], kind="categorical")
    assert [g["small_n"] for g in out["groups"]] == [False, False, True]
    tested = [_cell(out, g, t) for g in ("a", "b") for t in ("t1", "t2")]
    ps = [c["p"] for c in tested]
    order = sorted(range(4), key=lambda i: ps[i])
    want = [0.0] * 4
    running = 1.0
    for rank in range(4, 0, -1):
        i = order[rank - 1]
        running = min(running, ps[i] * 4 / rank)
        want[i] = round(running, 4)
    assert [c["q"] for c in tested] == want
    assert all(c["significant"] for c in tested)  # 75 % against 30 %: a real difference of 40-answer groups
    tiny = _cell(out, "tiny", "t1")
    assert tiny["q"] is None and not tiny["significant"] and tiny["count"] == 3 and tiny["share"] == 1.0


def test_a_group_of_exactly_min_n_is_tested() -> None:
    groups = ["a"] * 10 + ["b"] * 90
    themes = ["t1"] * 10 + ["t2"] * 90
    out = insight.breakdown("g", groups, themes, ["t1", "t2"], kind="categorical")
    assert not any(g["small_n"] for g in out["groups"])
    assert _cell(out, "a", "t1")["significant"] and _cell(out, "a", "t1")["q"] is not None


def test_with_min_group_size_one_tiny_groups_are_shown_but_not_called_significant() -> None:
    # min_group_size 1 keeps every value as a group: a value given by two answers that share a rare theme.
    rng = random.Random(3)
    meta = [{"city": f"c{rng.randrange(5)}"} for _ in range(500)] + [{"city": "Zug"}, {"city": "Zug"}]
    themes = [rng.choice(["t1", "t2", "t3"]) for _ in range(500)] + ["t4", "t4"]
    themes[:3] = ["t4"] * 3  # t4: 5 of 502 answers, two of them from Zug
    out = insight.breakdowns(["city"], meta, themes, ["t1", "t2", "t3", "t4"], min_group_size=1)[0]
    zug = _group(out, "Zug")
    assert zug["n"] == 2 and zug["small_n"]
    cell = _cell(out, "Zug", "t4")
    # By hand: P(X = 2), X ~ Hypergeometric(502, 5, 2) = C(5,2) / C(502,2) = 10 / 125751 = 0.0000795...
    assert abs(cell["p"] - 10 / 125751) < 1e-6 and not cell["significant"] and cell["q"] is None


def test_null_segments_with_tiny_groups_raise_no_discoveries() -> None:
    # Random labels (no effect): four adequate groups, a (missing) of 1-4 answers and, with min_group_size 1, a few
    # two-answer values. Any discovery is false; the rule makes none in the tiny groups by construction, and the
    # adequate groups stay near alpha (BH's FDR under the complete null is the chance of any discovery).
    shares = [0.3, 0.25, 0.2, 0.1, 0.08, 0.05, 0.02]
    runs, any_found, tiny_found = 100, 0, 0
    for seed in range(runs):
        rng = random.Random(seed)
        n = 600
        themes = rng.choices([f"t{i}" for i in range(len(shares))], weights=shares, k=n)
        labels = rng.choices(["a", "b", "c", "d"], weights=[4, 3, 2, 1], k=n)
        for i in range(rng.randint(1, 4)):
            labels[i] = None  # (missing)
        for i in range(10, 16):
            labels[i] = f"pair{i // 2}"
        out = insight.breakdowns(["g"], [{"g": v} for v in labels], themes, sorted(set(themes)), min_group_size=1)[0]
        found = [(g, c) for g in out["groups"] for c in g["themes"] if c["significant"]]
        any_found += bool(found)
        tiny_found += sum(1 for g, _ in found if g["n"] < insight.MIN_TESTED_N)
    assert tiny_found == 0
    assert any_found / runs <= 0.10, any_found
