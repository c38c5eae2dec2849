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
]


@pytest.mark.parametrize("row", ROWS, ids=repr)
def test_the_cli_stars_a_themes_impact_as_the_report_does(row: dict[str, Any]) -> None:
    assert impact_starred(row) == starred(row)
