"""What codebook edits left of the count (review44): said beside the count summary in the Markdown report, the CLI's
themes table and the dashboard. The CLI stands alone (it must not import the service's pipelines), so its sentence
is a copy, held equal to the service's here."""

from __future__ import annotations

from typing import Any

import pytest

from pipelines.thematic.edit import edit_result
from pipelines.thematic.render import count_after_edits
from tests.support.synthetic_result import synthetic_job
from thematiq_cli.render import count_after_edits as cli_count_after_edits
from thematiq_cli.render import themes_table


@pytest.mark.parametrize("edits", [
    [],
    [{"op": "rename", "theme": "t1", "label": "Renamed"}],
    [{"op": "merge", "themes": ["t1", "t2"]}],
    [{"op": "delete", "theme": "t3"}, {"op": "merge", "themes": ["t1", "t2", "t4"]}],
], ids=["none", "rename", "merge", "delete-merge"])
def test_the_cli_says_what_the_report_says(edits: list[dict[str, Any]]) -> None:
    items, doc = synthetic_job(120, themes=6, seed=5, impact=False)
    summary = "6 themes, with 12 sub-themes under them."
    doc["run"]["theme_count"] = {"criterion": "fixed", "scores": [], "summary": summary, "confidence_label": "high",
                                 "confidence": 0.9, "explanation": f"{summary} Why: num_themes fixes the count"}
    out = edit_result(doc, {"edits": edits}, items) if edits else doc
    said = count_after_edits(out)
    assert cli_count_after_edits(out) == said
    assert (said is None) == all(e["op"] == "rename" for e in edits)
    if said:
        assert said.endswith(f": {len(out['themes'])} themes, with {out['levels']['fine_count']} sub-themes under them.")
        assert said in themes_table(out)
