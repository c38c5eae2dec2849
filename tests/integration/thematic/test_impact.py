"""Issue 23, a theme's impact on a score: planted effects on synthetic data, through the pipeline, and bad input."""

from __future__ import annotations

import random
from typing import Any

import pytest

from pipelines.thematic import ThematicParams
from pipelines.thematic.edit import edit_result
from pipelines.thematic.impact import impact
from pipelines.thematic.render import render_md
from pipelines.thematic.validate import prepare
from shared.core.errors import ValidationFailed
from tests.support.thematic_data import feedback

from .test_insight_pipeline import _majority, _run


def test_a_theme_scoring_three_points_lower_ranks_first_and_unaffected_intervals_cover_0() -> None:
    import numpy as np

    covered = total = 0
    for seed in range(20):
        rng = np.random.default_rng(seed)
        has = rng.random((500, 5)) < [0.25, 0.2, 0.2, 0.15, 0.15]
        score = 7 + rng.normal(0, 2, size=500) - 3 * has[:, 2]
        doc = impact(score.tolist(), [[f"t{j + 1}" for j in np.flatnonzero(r)] for r in has],
                     [{"id": f"t{j + 1}", "label": f"t{j + 1}"} for j in range(5)], key="s", scale="numeric")
        assert doc["themes"][0]["theme_id"] == "t3" and doc["themes"][0]["ci_high"] < 0, doc["themes"][0]
        for r in doc["themes"][1:]:
            total += 1
            covered += r["ci_low"] <= 0 <= r["ci_high"]
    # Independent themes: an unaffected theme's impact is 0, and a 95 % interval covers it ~95 % of the time.
    assert covered / total >= 0.9, (covered, total)


def _scored(per_theme: int, seed: int) -> tuple[list[dict[str, Any]], list[str]]:
    items, truth = feedback(per_theme=per_theme, seed=seed)
    rng = random.Random(seed)
    for it, t in zip(items, truth, strict=True):
        # A 0-10 rating: app crashes cost 3 points; the column comes from a CSV as text half the time.
        x = max(0, min(10, round(rng.gauss(8, 1.5)) - (3 if t == "app" else 0)))
        it["metadata"] = {"nps": str(x) if rng.random() < 0.5 else x, "plan": rng.choice(["pro", "free"])}
    return items, truth


def test_impact_through_the_pipeline_ranks_the_planted_theme_first_and_follows_an_edit() -> None:
    items, truth = _scored(30, seed=3)
    doc = _run(items, num_themes=4, score={"key": "nps", "scale": "nps"})
    imp = doc["impact"]
    major = _majority(doc, {str(it["id"]): t for it, t in zip(items, truth, strict=True)})
    assert imp["key"] == "nps" and imp["scale"] == "nps" and imp["n"] == doc["run"]["counts"]["usable"]
    first = imp["themes"][0]
    assert major[first["theme_id"]] == "app" and first["ci_high"] < 0, imp["themes"]
    assert [t["theme_id"] for t in imp["themes"]] == sorted((t["theme_id"] for t in imp["themes"]),
                                                            key=lambda t: next(x["impact"] for x in imp["themes"] if x["theme_id"] == t))
    md = render_md(doc)[1].decode()
    assert "## Impact on nps" in md and first["label"] in md.split("## Impact on nps")[1]
    # A merge changes which responses have which theme: the impact table follows it.
    a, b = doc["themes"][0]["id"], doc["themes"][1]["id"]
    merged = edit_result(doc, {"edits": [{"op": "merge", "themes": [a, b]}]}, items)
    assert {t["theme_id"] for t in merged["impact"]["themes"]} == {t["id"] for t in merged["themes"]}
    assert next(t for t in merged["impact"]["themes"] if t["theme_id"] == a)["n"] == \
        next(t["count"] for t in merged["themes"] if t["id"] == a)


class _NoEarlier:
    def result(self, job_id: str, *, field: str) -> dict[str, Any]:
        raise AssertionError("not asked")


@pytest.mark.parametrize(("score", "field"), [
    ({"key": "rating", "scale": "nps"}, "params.score.key"),      # no response has it
    ({"key": "plan", "scale": "numeric"}, "params.score.key"),    # not a number
    ({"key": "nps", "scale": "csat"}, "params.score.scale"),      # 0-10 is not CSAT's 1-5
])
def test_a_score_that_does_not_fit_the_input_is_refused_naming_the_field(score: dict[str, str], field: str) -> None:
    items, _ = _scored(5, seed=1)
    items[0]["metadata"]["nps"] = 0  # a 0 is outside 1-5
    with pytest.raises(ValidationFailed) as err:
        prepare(ThematicParams(score=score), items, _NoEarlier())
    assert [e["field"] for e in err.value.errors] == [field], err.value.errors
    with pytest.raises(ValueError):
        ThematicParams(score={"key": "nps", "scale": "stars"})
