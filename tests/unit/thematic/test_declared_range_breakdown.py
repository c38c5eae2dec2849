"""A breakdown by a field with a declared rating range groups per value only when the values are the rating's
points (integers) (review46m).

researcher46 made ``params.score.scale`` take the ranges 0-5 / 1-5 / 1-7 / 1-10, documented as "a rating on that
range, the mean, every value in the range": an average rating (7.3) is allowed. The breakdown by that field was then
a group per distinct value (``derive.declared_scales`` passes the range to ``insight.bucket``), so 300 averages of a
1-10 rating were 300 groups of one, all pooled as "other values": the breakdown said nothing, where the same field
declared "numeric" (as it had to be before 1.7) was four quartile ranges. The same held for a declared
``sentiment_from`` scale (1.4), which also takes any number in its range.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from pipelines.thematic import derive, insight


def _groups(values: list[object], score: dict[str, str]) -> Counter[object]:
    scale = derive.declared_scales({}, score).get("r")
    b = insight.groups_of("r", [{"r": v} for v in values], min_group_size=insight.MIN_GROUP_SIZE, scale=scale)
    return Counter(b.labels)


@pytest.mark.parametrize("scale", ["1-10", "0-5", "1-7", "1-5"])
def test_averages_on_a_declared_range_are_grouped_as_numbers_are_not_one_other_values(scale: str) -> None:
    lo, hi = {"0-5": (0, 5), "1-5": (1, 5), "1-7": (1, 7), "1-10": (1, 10)}[scale]
    rnd = random.Random(7)
    values: list[object] = [round(rnd.uniform(lo, hi), 2) for _ in range(300)]
    declared = _groups(values, {"key": "r", "scale": scale})
    numeric = _groups(values, {"key": "r", "scale": "numeric"})
    assert declared == numeric, declared
    assert len(declared) >= 3 and insight.OTHER_VALUES not in declared, declared


def test_integer_points_of_a_declared_range_are_still_a_group_per_value() -> None:
    values: list[object] = [0, 1, 2, 3, 4, 5] * 20 + [None] * 3
    got = _groups(values, {"key": "r", "scale": "0-5"})
    assert got == {"0": 20, "1": 20, "2": 20, "3": 20, "4": 20, "5": 20, insight.MISSING: 3}


def test_averages_sent_as_text_are_read_as_the_job_reads_them() -> None:
    rnd = random.Random(3)
    numbers = [round(rnd.uniform(1, 10), 1) for _ in range(200)]
    as_text: list[object] = [f"{x}" for x in numbers]  # a spreadsheet's cells
    assert _groups(as_text, {"key": "r", "scale": "1-10"}) == _groups(list[object](numbers), {"key": "r", "scale": "numeric"})
