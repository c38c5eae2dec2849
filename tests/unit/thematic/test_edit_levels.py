"""An edit keeps ``levels`` true to the themes it leaves (review41): after a delete or a merge the result still said
``broad_count`` 8 and ``fine_count`` 16 for 7 themes (the dashboard's "8 broad themes, 16 sub-themes"); the counts
are now those of the edited document, as ``document.py`` computes them for a fresh result."""

from __future__ import annotations

from typing import Any

import pytest

from pipelines.thematic.edit import edit_result
from tests.support.synthetic_result import synthetic_job


def _levels_hold(doc: dict[str, Any]) -> None:
    lv = doc["levels"]
    assert lv["broad_count"] == (len(doc["parents"]) if lv["broad"] == "parents" else len(doc["themes"]))
    assert lv["fine_count"] == (len(doc["themes"]) if lv["fine"] == "themes" else len(doc["subthemes"]))


@pytest.mark.parametrize("edits", [
    lambda ids: [{"op": "delete", "theme": ids[0]}],
    lambda ids: [{"op": "merge", "themes": ids[:3], "label": "Three as one"}],
    lambda ids: [{"op": "delete", "theme": i} for i in ids],
    lambda ids: [{"op": "rename", "theme": ids[0], "label": "Renamed"}],
], ids=["delete", "merge", "delete-all", "rename"])
def test_levels_count_the_themes_an_edit_leaves(edits: Any) -> None:
    items, doc = synthetic_job(40, seed=4, impact=False)
    _levels_hold(doc)
    out = edit_result(doc, {"edits": edits([t["id"] for t in doc["themes"]])}, items)
    _levels_hold(out)
