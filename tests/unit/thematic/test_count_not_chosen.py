"""A theme count the data did not choose (num_themes given, too few responses) states no confidence (review46).

``CountChoice``'s defaults (1.0, "high") went into ``run.theme_count``, so the report printed "**Theme count
confidence: high** (1.00)" above "num_themes=6 was requested", and for 2 responses on two different subjects
above "2 usable responses ... allow at most one theme"; the CLI and the dashboard said "Count confidence: high".
"""

from __future__ import annotations

import numpy as np
import pytest

from pipelines.thematic import cluster, render
from tests.support.synthetic_result import synthetic_job
from thematiq_cli.render import themes_table


def _units(n: int, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).normal(size=(n, 16)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize(("n", "num_themes", "criterion"), [(3, None, "single"), (40, 1, "single"), (40, 3, "fixed")])
def test_the_count_json_has_no_confidence_when_the_data_did_not_choose_the_count(
        n: int, num_themes: int | None, criterion: str) -> None:
    cl = cluster.cluster(_units(n), num_themes=num_themes, max_themes=None, min_theme_size=5, seed=0)
    assert cl.criterion == criterion
    tc = cluster.count_json(cl.count, cl.k)
    assert tc["confidence"] is None and tc["confidence_label"] is None, tc


def test_a_count_the_data_chose_keeps_its_confidence() -> None:
    cl = cluster.cluster(_units(60), num_themes=None, max_themes=None, min_theme_size=5, seed=0)
    assert cl.criterion not in ("fixed", "single")
    tc = cluster.count_json(cl.count, cl.k)
    assert tc["confidence_label"] in ("high", "medium", "low") and isinstance(tc["confidence"], float)


def test_the_report_and_the_cli_state_no_confidence_for_a_requested_count() -> None:
    _, doc = synthetic_job(40, themes=3, impact=False)
    cl = cluster.cluster(_units(40), num_themes=3, max_themes=None, min_theme_size=5, seed=0)
    doc.setdefault("run", {})["theme_count"] = {
        "criterion": cl.criterion, "explanation": cl.explanation, "scores": [], **cluster.count_json(cl.count, 3)}
    md = render.render_md(doc)[1].decode()
    assert "confidence" not in md.lower(), md[:600]
    assert "num\\_themes=3 was requested" in md
    out = themes_table(doc)
    assert "Count confidence" not in out
    if doc.get("levels"):
        assert "Levels:" in out, out[:600]
