"""The CLI's ``impact_starred`` is a copy of the service's ``pipelines.thematic.impact.starred``.

The CLI stands alone (it must not import the service's pipelines), so the two cannot be one function. The
Markdown report and ``thematiq impact`` must star the same themes, so the copies are held equal here.
"""

from __future__ import annotations

from typing import Any

import pytest

from pipelines.thematic.impact import starred
from thematiq_cli.render import impact_starred

ROWS: list[dict[str, Any]] = [
    {"ci_low": -3.0, "ci_high": -0.5}, {"ci_low": 0.5, "ci_high": 2}, {"ci_low": -1.0, "ci_high": 1.0},
    {"ci_low": -3.0, "ci_high": -0.5, "small_n": True}, {"ci_low": 0.5, "ci_high": 2.0, "small_n": False},
    {"ci_low": None, "ci_high": -0.5}, {"ci_low": -3.0, "ci_high": None}, {}, {"ci_low": 0.0, "ci_high": 1.0},
    {"ci_low": -1.0, "ci_high": 0.0}, {"ci_low": "-3", "ci_high": "-1"},
    {"ci_low": 0.2, "ci_high": 1.0, "explained_by": ["t3"]}, {"ci_low": -3.0, "ci_high": -0.5, "explained_by": []},
]


@pytest.mark.parametrize("row", ROWS, ids=repr)
def test_the_cli_stars_a_themes_impact_as_the_report_does(row: dict[str, Any]) -> None:
    assert impact_starred(row) == starred(row)


def test_the_cli_table_says_which_themes_explain_an_impact_and_prints_the_note() -> None:
    from thematiq_cli.render import impact_table

    imp = {"key": "nps", "scale": "numeric", "overall": 7.0, "n": 600, "min_n": 10, "single_label": True,
           "note": "One theme per response: a theme's impact is relative to the other themes together.",
           "themes": [{"theme_id": "t3", "label": "Fees", "impact": -0.9, "ci_low": -1.2, "ci_high": -0.6, "n": 90,
                       "score": 4.0},
                      {"theme_id": "t1", "label": "Late delivery", "impact": 0.3, "ci_low": 0.1, "ci_high": 0.5,
                       "n": 150, "score": 7.4, "explained_by": ["t3"]}]}
    out = impact_table(imp)
    assert out.splitlines()[0] == imp["note"]
    fees = next(line for line in out.splitlines() if line.rstrip().endswith("Fees"))
    late = next(line for line in out.splitlines() if "Late delivery" in line)
    assert "-0.90*" in fees
    assert "+0.30*" not in late and "+0.30 " in late and "(against Fees only)" in late
