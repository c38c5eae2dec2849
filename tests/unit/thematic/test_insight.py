"""Breakdowns and wave comparison on synthetic data with planted effects (issue 15)."""

from __future__ import annotations

import random

from pipelines.thematic import insight
from pipelines.thematic.result import Breakdown


def _survey(rng: random.Random, n: int, rates: dict[str, dict[str, float]], sizes: dict[str, float]):
    groups, themes = [], []
    names = list(sizes)
    for _ in range(n):
        g = rng.choices(names, weights=[sizes[x] for x in names])[0]
        r, acc, theme = rng.random(), 0.0, None
        for t, p in rates[g].items():
            acc += p
            if r < acc:
                theme = t
                break
        groups.append(g)
        themes.append(theme)
    return groups, themes


def _cell(result: dict, group: str, theme: str) -> dict:
    g = next(x for x in result["groups"] if x["value"] == group)
    return next(c for c in g["themes"] if c["theme_id"] == theme)


def test_a_theme_three_times_as_common_in_one_segment_is_flagged_and_a_flat_one_is_not() -> None:
    rng = random.Random(1)
    rates = {"enterprise": {"t1": 0.30, "t2": 0.20, "t3": 0.10}, "free": {"t1": 0.10, "t2": 0.20, "t3": 0.10}}
    groups, themes = _survey(rng, 2000, rates, {"enterprise": 0.3, "free": 0.7})
    result = insight.breakdown("plan", groups, themes, ["t1", "t2", "t3"], kind="categorical")
    hot = _cell(result, "enterprise", "t1")
    assert hot["significant"] and hot["lift"] > 2.0, hot
    assert not _cell(result, "enterprise", "t2")["significant"]
    assert not _cell(result, "free", "t3")["significant"]
    assert sum(g["n"] for g in result["groups"]) == 2000


def test_the_false_positive_rate_under_no_effect_stays_near_alpha() -> None:
    runs, with_discovery = 200, 0
    rates = {g: {f"t{i}": 0.12 for i in range(6)} for g in "abcd"}
    for seed in range(runs):
        groups, themes = _survey(random.Random(seed), 800, rates, dict.fromkeys("abcd", 1.0))
        result = insight.breakdown("g", groups, themes, [f"t{i}" for i in range(6)], kind="categorical")
        if any(c["significant"] for g in result["groups"] for c in g["themes"]):
            with_discovery += 1
    # Under the global null BH's FDR equals the chance of any discovery: about alpha (0.05).
    assert with_discovery / runs <= 0.10, with_discovery


def test_nps_scores_are_bucketed_missing_values_get_a_group_and_small_groups_are_pooled() -> None:
    values = [0, 5, 6, 7, 8, 9, 10, None, 3, 9] * 10
    b = insight.bucket(values, key="nps")  # a key that names NPS (stats44: only then, or declared)
    assert b.kind == "nps"
    assert set(b.labels) == {"detractor", "passive", "promoter", insight.MISSING}
    cats = ["web"] * 50 + ["app"] * 40 + ["fax"] * 3 + [None] * 7
    pooled = insight.pool_small(insight.bucket(cats).labels, min_size=20)
    assert pooled.count(insight.OTHER_VALUES) == 3 and pooled.count(insight.MISSING) == 7


def test_numeric_fields_become_ranges() -> None:
    b = insight.bucket([float(i) for i in range(100)] + [None])
    assert b.kind == "numeric" and 3 <= len(set(b.labels) - {insight.MISSING}) <= 4
    assert b.labels[-1] == insight.MISSING


def test_a_planted_change_between_waves_is_found_and_new_and_gone_themes_are_listed() -> None:
    result = insight.compare({"t1": 100, "t2": 200, "old": 30}, 1000, {"t1": 250, "t2": 205, "fresh": 40}, 1000)
    rows = {r["theme_id"]: r for r in result["themes"]}
    assert rows["t1"]["significant"] and rows["t1"]["change"] > 0.1
    assert not rows["t2"]["significant"]
    assert result["new"] == ["fresh"] and result["gone"] == ["old"]


def test_bh_q_values_are_monotone_in_p() -> None:
    p = [0.001, 0.04, 0.03, 0.2, 0.5]
    q = insight.benjamini_hochberg(p)
    order = sorted(range(len(p)), key=lambda i: p[i])
    assert all(q[order[i]] <= q[order[i + 1]] for i in range(len(p) - 1))
    assert q[0] == 0.005


def test_an_integer_too_large_for_a_float_makes_the_field_categorical_not_a_crash() -> None:
    # Accepted at submission (a breakdown takes any values), so float() raising OverflowError failed the job.
    b = insight.bucket([10**400, *range(50)])
    assert b.kind == "categorical" and b.labels[1] == "0"


def test_list_object_and_boolean_values_are_labelled_as_the_metadata_filter_writes_them() -> None:
    # str() gave Python's syntax ("['a', 'b']", "{'x': None}", "True"), which no JSON reader takes and which the
    # responses route's metadata[KEY]= filter (insight.meta_text) never matches: a label could not be followed up.
    values = [["a", "b"], {"x": None}, True, "pro", None, 7.0]
    labels = insight.bucket(values).labels
    assert labels == ['["a", "b"]', '{"x": null}', "true", "pro", insight.MISSING, "7"]
    assert labels[:4] == [insight.meta_text(v) for v in values[:4]]


def test_a_one_to_five_rating_is_grouped_by_its_values_not_as_nps() -> None:
    # Stars 1-5 are integers in 0-10: as NPS groups every answer was a "detractor" (one group, nothing to see).
    b = insight.bucket([1, 2, 3, 4, 5, None, 4.0] * 10)
    assert b.kind == "categorical"
    assert set(b.labels) == {"1", "2", "3", "4", "5", insight.MISSING}
    assert b.labels[:7] == ["1", "2", "3", "4", "5", insight.MISSING, "4"]  # as the metadata filter writes them


def test_groups_on_a_scale_are_in_its_order_and_categories_largest_first() -> None:
    # By size, a 1-5 rating's columns read 3, 2, 1, 4, 5 and NPS groups came promoter first when promoters led.
    def order(values: list[str], kind: str) -> list[str]:
        themes = ["t1"] * len(values)
        return [g["value"] for g in insight.breakdown("f", values, themes, ["t1"], kind=kind)["groups"]]

    assert order(["3"] * 5 + ["2"] * 4 + ["1"] * 3 + ["5"] * 2 + ["4"] + [insight.MISSING] * 6, "categorical") == \
        ["1", "2", "3", "4", "5", insight.MISSING.value]
    assert order(["promoter"] * 5 + ["passive"] * 2 + ["detractor"], "nps") == ["detractor", "passive", "promoter"]
    assert order(["7–9"] * 2 + ["0–2"] + ["3–6"] * 3 + [insight.OTHER_VALUES] * 9, "numeric") == \
        ["0–2", "3–6", "7–9", insight.OTHER_VALUES.value]
    assert order(["free"] * 3 + ["plus"] * 5 + ["7"], "categorical") == ["plus", "free", "7"]


def test_quartile_ranges_of_close_decimals_keep_distinct_labels() -> None:
    # The ranges' edges were printed to 3 significant digits, so four quartiles of order values 1000.00-1004.99
    # were each "1e+03–1e+03": one group (the breakdown showed nothing), and 99999.5 was labelled "1e+05". Now as
    # many digits as tell the edges apart, never fewer than the integer digits.
    rng = random.Random(0)
    values = [round(1000 + rng.random() * 5, 2) for _ in range(200)]
    b = insight.bucket(values)
    assert b.kind == "numeric" and sorted(set(b.labels)) == [
        "1000.01–1001.44", "1001.45–1002.7", "1002.74–1003.79", "1003.92–1004.98"]
    assert sorted(set(insight.bucket([48.85661, 48.85702, 48.8581, 48.8592] * 30).labels)) == [
        "48.8566–48.857", "48.8581", "48.8592"]  # a range of one value reads as the value (review46)
    assert set(insight.bucket([1234.56, 2345.67, 99999.5, 150000.25] * 30).labels) == {
        "1234.6–2345.7", "99999.5", "150000.2"}
    # Spread-out values keep 3 digits; huge and tiny ones their exponent form.
    assert max(len(label) for label in insight.bucket([rng.random() * 1000 for _ in range(400)]).labels) <= 13
    assert set(insight.bucket([1e20, 3e20, 5e25, 7e30] * 10).labels) == {"1e+20–3e+20", "5e+25", "7e+30"}
    # The columns still follow the scale (by their lower edge), exponent forms included.
    groups = insight.bucket([1e-07, 2e-07, 3.5e-07, 4e-07] * 30).labels
    order = [g["value"] for g in insight.breakdown("f", groups, ["t1"] * len(groups), ["t1"], kind="numeric")["groups"]]
    assert order == ["1e-07–2e-07", "3.5e-07", "4e-07"]


def test_missing_values_keep_their_group_beyond_the_twelve_largest() -> None:
    # "(missing) stays" (pool_small's rule) held only while (missing) was among the 12 largest groups: with 13
    # larger segments its responses were pooled into "other values" with real values.
    labels = [f"city {i:02d}" for i in range(14) for _ in range(30 + i)] + [None] * 21
    pooled = insight.pool_small(insight.bucket(labels).labels, min_size=20)
    assert pooled.count(insight.MISSING) == 21
    assert pooled.count(insight.OTHER_VALUES) == 30 + 31  # the two smallest cities


def test_a_breakdown_by_the_nps_score_groups_it_as_nps_whatever_values_it_happens_to_have() -> None:
    # params.score {"key", "scale": "nps"} says the field is a 0-10 likelihood to recommend; a breakdown by it
    # inferred the grouping from the values instead: an unhappy panel's answers in 1-5 were five star groups, and
    # only 0s and 10s two quartile ranges "0–0" and "10–10", where the impact table beside them speaks of NPS.
    from pipelines.thematic import derive
    from tests.support.synthetic_result import synthetic_job

    _, doc = synthetic_job(200, themes=3, seed=4, impact=False)
    for values, want in (([1, 2, 3, 4, 5], ["detractor"]), ([0, 10], ["detractor", "promoter"])):
        meta = {str(a["response_id"]): {"ltr": values[i % len(values)]} for i, a in enumerate(doc["assignments"])}
        got = derive.derived(doc, meta, breakdown_by=["ltr"], score={"key": "ltr", "scale": "nps"}).breakdowns[0]
        assert got["kind"] == "nps" and [g["value"] for g in got["groups"]] == want, got["groups"]
        # Without the score, the values still decide (a 1-5 field is a rating).
        plain = derive.derived(doc, meta, breakdown_by=["ltr"]).breakdowns[0]
        assert plain["kind"] != "nps"


def test_a_real_value_named_like_a_synthetic_group_is_its_own_group() -> None:
    # A survey whose answers include the literal "(missing)" and "other values" (issue 23): they merged with the
    # synthetic groups of the same name, the responses without a value and the pool of rare values.
    values = (["(missing)"] * 25 + [None] * 30 + ["other values"] * 22 + ["pro"] * 40
              + [f"rare{i}" for i in range(10)])
    labels = insight.pool_small(insight.bucket(values, key="plan").labels)
    out = insight.breakdown("plan", labels, ["t1"] * len(values), ["t1"], kind="categorical")
    groups = {(g["value"], g["synthetic"]): g["n"] for g in out["groups"]}
    assert groups == {("(missing)", None): 25, ("(missing)", "missing"): 30, ("other values", None): 22,
                      ("pro", None): 40, ("other values", "other"): 10}
    # Synthetic groups last; every heading reads differently (a real value that reads as one is quoted).
    assert [insight.heading(g) for g in out["groups"]] == [
        "pro", '"(missing)"', '"other values"', "(missing)", "other values"]
    Breakdown.model_validate(out)
    # A document before 1.6 (no synthetic): its groups of these names were the synthetic ones.
    assert insight.synthetic_of({"value": "(missing)"}) == "missing"
    assert insight.heading({"value": '"(missing)"', "synthetic": None}) == '""(missing)""'


def test_a_quartile_range_of_one_value_reads_as_that_value() -> None:
    # review46: a numeric field with few distinct values (7 ages 30-36) read "36–36" for a quartile holding one value.
    # insight._quartile_edges cuts at sorted positions int(n * q), q = .25 .5 .75, and the last value.
    # 16 ages: positions 4, 8, 12 -> 32, 34, 36; ranges 30–32, 33–34, 35–36 (no range of one value).
    ages = [30, 31, 32, 32, 32, 33, 33, 33, 34, 35, 36, 36, 36, 36, 36, 36]
    got = insight.bucket(ages)
    assert got.kind == "numeric" and sorted(set(got.labels)) == ["30–32", "33–34", "35–36"]
    # Without the 35 (15 ages): positions 3, 7, 11 -> 32, 33, 36; ranges 30–32, then 33 alone, then 34–36.
    ages = [30, 31, 32, 32, 32, 33, 33, 33, 34, 36, 36, 36, 36, 36, 36]
    got = insight.bucket(ages)
    assert sorted(set(got.labels)) == ["30–32", "33", "34–36"]  # was "33–33"
    assert [lab for a, lab in zip(ages, got.labels, strict=True) if a == 33] == ["33"] * 3
    # Non-integer edges the same: 8 values, positions 2, 4, 6 -> 2.5, 3.5, 5.5, and the last 6.5.
    got = insight.bucket([1.5, 2.5, 2.5, 2.5, 3.5, 4.5, 5.5, 6.5])
    assert got.labels == ["1.5–2.5"] * 4 + ["3.5", "4.5–5.5", "4.5–5.5", "6.5"]
