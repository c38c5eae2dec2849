"""``comparison.groups``, the families of near earlier themes each tested as one share (research23), in every view
(review44): the Markdown report, the xlsx Changes sheet, the CLI's `changes` (and the dashboard, tests/e2e/ui). They
were stored and shown by none, so a significant family change, and the only test of a theme a codebook split took
out of the per-theme rows ("split: not tested"), were in the JSON alone."""

from __future__ import annotations

import io
from typing import Any

import openpyxl

from pipelines.thematic.render import FAMILIES_NOTE, render_md
from pipelines.thematic.xlsx import FAMILY_COLUMNS, render_xlsx
from tests.support.markdown_tokens import parser, walk
from tests.support.synthetic_result import synthetic_job
from thematiq_cli.render import FAMILIES_NOTE as CLI_FAMILIES_NOTE
from thematiq_cli.render import comparison_table

EVIL = "<script>x</script> | =cmd"


def _compared() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    items, doc = synthetic_job(60, themes=3, seed=5, impact=False)
    doc["themes"][0]["label"] = EVIL
    rows = [{"theme_id": t["id"], "label": t["label"], "share_then": 0.2, "share_now": 0.3, "change": 0.1, "p": 0.2,
             "q": 0.3, "significant": False, "count_then": 20, "count_now": 18, "status": "kept"} for t in doc["themes"]]
    groups = [{"family": "f1", "theme_ids": ["t1", "t2"], "count_then": 40, "count_now": 40, "share_then": 0.4,
               "share_now": 0.6667, "change": 0.2667, "p": 0.0004, "q": 0.0008, "significant": True, "weight": 1.0,
               "test": "z"},
              {"family": "f2", "theme_ids": ["t3", "t7"], "count_then": 30, "count_now": 2, "share_then": 0.3,
               "share_now": 0.0333, "change": -0.2667, "p": 0.02, "q": 0.02, "significant": True, "weight": 1.0,
               "test": "fisher"}]
    doc["comparison"] = {"job_id": "a" * 28, "n_then": 100, "n_now": 60, "themes": rows, "new": [], "gone": [],
                         "then": {"t7": {"label": "Gone since", "count": 5}}, "groups": groups,
                         "testing": {"procedure": "bh"}}
    return items, doc


def test_the_report_lists_each_family_with_its_change_inert() -> None:
    _, doc = _compared()
    text = render_md(doc)[1].decode()
    assert FAMILIES_NOTE in text
    rows = [line for line in text.split(FAMILIES_NOTE, 1)[1].splitlines() if line.startswith("| ")][1:]
    assert rows == [
        "| \\<script\\>x\\</script\\> \\| =cmd + " + doc["themes"][1]["label"] + " | 40.0% | 66.7% | **+26.7 pts** |",
        f"| {doc['themes'][2]['label']} + Gone since | 30.0% | 3.3% | **-26.7 pts** *(exact)* |"]
    kinds = {t.type for t in walk(parser().parse(text))}
    assert not {k for k in kinds if k.startswith("html_")}


def test_the_workbook_and_the_cli_list_each_family() -> None:
    items, doc = _compared()
    wb = openpyxl.load_workbook(io.BytesIO(render_xlsx(doc, items)[1]))
    got = [[c.value for c in r] for r in wb["Changes"].iter_rows()]
    at = next(i for i, r in enumerate(got) if r[0] == FAMILIES_NOTE)
    assert got[at + 1] == list(FAMILY_COLUMNS)
    assert got[at + 2] == ["f1", "t1;t2", f"{EVIL} + {doc['themes'][1]['label']}", 40, 0.4, 40, 0.6667, 0.2667,
                           0.0004, 0.0008, True, "z"]
    assert got[at + 3][:3] == ["f2", "t3;t7", f"{doc['themes'][2]['label']} + Gone since"]
    assert CLI_FAMILIES_NOTE == FAMILIES_NOTE
    out = comparison_table(doc["comparison"])
    assert FAMILIES_NOTE in out
    assert "+26.7 pts*" in out and "-26.7 pts* (exact)" in out and "Gone since" in out
