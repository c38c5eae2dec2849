"""When a 0-10 integer field is grouped as NPS (detractor / passive / promoter) without being told (stats44).

Before, any integer field in 0-10 with more than two values was: "orders last year" 0-10 made every customer with
six orders or fewer a "detractor". Now, undeclared, only a key that names NPS is (``insight.names_nps``); declared
(``params.score`` nps, ``sentiment_from`` read as 0-10) it is NPS groups whatever its key; else quartile ranges.
"""

from __future__ import annotations

import pytest

from pipelines.thematic import derive, insight
from tests.support.synthetic_result import synthetic_job

ORDERS = [0, 1, 2, 2, 3, 4, 5, 6, 8, 10] * 10


@pytest.mark.parametrize("key", ["orders_last_year", "years as a customer", "visits", "snps", None])
def test_an_undeclared_zero_to_ten_field_whose_key_does_not_name_nps_is_numeric(key: str | None) -> None:
    b = insight.bucket(ORDERS, key=key)
    assert b.kind == "numeric"
    assert "detractor" not in b.labels
    # Quartile ranges of the integers. By hand: sorted, the 100 values' 25th, 50th and 75th (0-based) are 2, 4 and
    # 6, the largest 10; each range starts at the next value present: 0-2, 3-4, 5-6, 8-10.
    assert sorted(set(b.labels), key=lambda x: int(x.split("–")[0])) == ["0–2", "3–4", "5–6", "8–10"]


@pytest.mark.parametrize("key", ["nps", "NPS score", "nps_2026", "q7_nps", "Net Promoter", "net-promoter",
                                 "How likely are you to recommend us? (0-10)"])
def test_a_key_that_names_nps_is_grouped_as_nps(key: str) -> None:
    b = insight.bucket(ORDERS, key=key)
    assert b.kind == "nps"
    assert b.labels[:10] == ["detractor"] * 8 + ["passive", "promoter"]


def test_a_one_to_five_field_named_nps_is_still_a_rating_and_two_values_still_no_nps() -> None:
    # The 1-5 rule comes first (a 1-5 rating), and 0/1 is a yes/no field whatever its key.
    assert insight.bucket([1, 2, 3, 4, 5] * 4, key="nps").kind == "categorical"
    assert insight.bucket([0, 1] * 10, key="nps").kind == "categorical"  # a group per value (FEW_VALUES)


def test_strings_stay_categories() -> None:
    # A breakdown groups strings as they are: a postal code "02139" is no number (a CSV's cells are strings).
    b = insight.bucket(["02139", "10001", "02139", "94105"] * 5, key="zip")
    assert b.kind == "categorical" and set(b.labels) == {"02139", "10001", "94105"}


def _meta(doc: dict, key: str, values: list[int]) -> dict[str, dict[str, int]]:
    return {str(a["response_id"]): {key: values[i % len(values)]} for i, a in enumerate(doc["assignments"])}


def test_a_declared_score_or_an_inferred_zero_to_ten_sentiment_field_is_nps_whatever_its_key() -> None:
    _, doc = synthetic_job(200, themes=3, seed=4, impact=False)
    meta = _meta(doc, "rating", ORDERS)
    # Undeclared: numbers.
    assert derive.derived(doc, meta, breakdown_by=["rating"]).breakdowns[0]["kind"] == "numeric"
    # params.score of scale nps says so.
    scored = derive.derived(doc, meta, breakdown_by=["rating"], score={"key": "rating", "scale": "nps"})
    assert scored.breakdowns[0]["kind"] == "nps"
    # sentiment_from read it as a 0-10 rating (NPS groups): the breakdown agrees with the sentiment.
    inferred = {**doc, "sentiment": {"source": "metadata", "field": "rating", "scale": "score10",
                                     "rating_range": "0-10", "scale_from": "inferred"}}
    assert derive.derived(inferred, meta, breakdown_by=["rating"]).breakdowns[0]["kind"] == "nps"
    # An inferred 1-5 (stars) stays a group per value, as before.
    stars = {**doc, "sentiment": {"source": "metadata", "field": "rating", "scale": "stars",
                                  "rating_range": "1-5", "scale_from": "inferred"}}
    got = derive.derived(stars, _meta(doc, "rating", [1, 2, 3, 4, 5]), breakdown_by=["rating"]).breakdowns[0]
    assert got["kind"] == "categorical" and [g["value"] for g in got["groups"]] == ["1", "2", "3", "4", "5"]


def test_a_field_of_a_few_numbers_is_a_group_per_value_not_ranges_of_one_value() -> None:
    # review44r: once the CLI sent number columns as numbers, a 0/1 flag read as the quartile ranges "0–0" and "1–1".
    flag = insight.bucket([0, 1, 1, None, 0, 1] * 5)
    assert flag.kind == "categorical" and set(flag.labels) == {"0", "1", insight.MISSING}
    codes = insight.bucket([3, 7, 9, 3, 7] * 6, key="store")  # three store codes in 0-10, key not NPS
    assert codes.kind == "categorical" and set(codes.labels) == {"3", "7", "9"}
    # Six values or more are a number like any other, in quartile ranges.
    assert insight.bucket([0, 1, 2, 3, 4, 6] * 5).kind == "numeric"
