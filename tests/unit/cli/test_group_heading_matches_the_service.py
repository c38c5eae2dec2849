"""A breakdown group's heading reads alike in every surface: the CLI's ``group_heading`` is a copy of the service's
``pipelines.thematic.insight.heading`` (the report), and a survey's own "(missing)" answer never reads as the
synthetic group of responses without a value (issue 23); the xlsx keeps the value as the Responses sheet has it
and says which group is synthetic in a column of its own."""

from __future__ import annotations

import io

import pytest

from pipelines.thematic import insight
from pipelines.thematic.render import render_md
from pipelines.thematic.xlsx import render_xlsx
from tests.support.synthetic_result import synthetic_job
from thematiq_cli.render import breakdown_table, group_heading

GROUPS = [
    {"value": "(missing)", "synthetic": "missing"}, {"value": "(missing)", "synthetic": None},
    {"value": "other values", "synthetic": "other"}, {"value": "other values", "synthetic": None},
    {"value": '"(missing)"', "synthetic": None}, {"value": "pro", "synthetic": None},
    {"value": "(missing)"}, {"value": "other values"}, {"value": "pro"},  # before schema 1.6
]


def test_the_cli_heads_every_group_as_the_service_does() -> None:
    assert [group_heading(g) for g in GROUPS] == [insight.heading(g) for g in GROUPS]
    assert len({insight.heading(g) for g in GROUPS[:6]}) == 6


def _doc_with_real_missing() -> tuple[list, dict]:
    items, doc = synthetic_job(60, themes=3, seed=7)
    values = ["(missing)"] * 25 + [None] * 30 + ["pro"] * 40
    labels = insight.pool_small(insight.bucket(values, key="plan").labels)
    doc["breakdowns"] = [insight.breakdown("plan", labels, ["t1"] * len(values), ["t1", "t2"], kind="categorical")]
    return items, doc


def test_cli_report_and_xlsx_keep_a_real_missing_answer_apart() -> None:
    openpyxl = pytest.importorskip("openpyxl")
    items, doc = _doc_with_real_missing()
    header = breakdown_table(doc, "plan").splitlines()[2]
    assert '"(missing)" n=25' in header and " (missing) n=30" in header
    md = render_md(doc)[1].decode()
    assert '| pro (n=40) | "(missing)" (n=25) | (missing) (n=30) |' in md
    wb = openpyxl.load_workbook(io.BytesIO(render_xlsx(doc, items)[1]), read_only=True)
    rows = list(wb["Breakdowns"].iter_rows(values_only=True))
    col, syn = rows[0].index("group"), rows[0].index("synthetic")
    assert {(r[col], r[syn] if len(r) > syn else None, r[3]) for r in rows[1:]} == {("(missing)", None, 25), ("(missing)", "missing", 30),
                                                          ("pro", None, 40)}


def test_a_multi_label_result_says_its_shares_add_up_to_more_than_all_in_the_cli_and_the_report() -> None:
    # 15 % of synthetic_job's responses have a second theme: the shares summed to 115 % and nothing said why.
    from pipelines.thematic.render import multi_label_note
    from thematiq_cli.render import multi_label_note as cli_note
    from thematiq_cli.render import themes_table

    _, doc = synthetic_job(200, seed=3)
    n = sum(1 for a in doc["assignments"] if len(a["themes"]) > 1)
    assert n > 1
    note = multi_label_note(doc)
    assert note == cli_note(doc) and note is not None and note.startswith(f"{n} responses have more than one theme")
    assert note in render_md(doc)[1].decode()
    assert note.split(":")[0] in themes_table(doc)
    for a in doc["assignments"]:
        a["themes"] = a["themes"][:1]
    assert multi_label_note(doc) is None and "more than one theme" not in render_md(doc)[1].decode()


def test_thematiq_themes_lists_the_broad_themes_with_their_counts() -> None:
    # "Levels: 8 broad themes (parents)" and no broad theme named: the report and the dashboard list them.
    from tests.unit.thematic.test_verbatims import _with_parents
    from thematiq_cli.render import themes_table

    _, doc = _with_parents()
    doc["parents"][0]["count"], doc["parents"][0]["share"] = 97, 0.5106
    out = themes_table(doc).splitlines()
    head = next(i for i, line in enumerate(out) if line.split()[:3] == ["ID", "BROAD", "THEME"])
    assert out[head + 2].split()[:5] == ["p1", "Broad", "one", "97", "51.1%"]
    assert "Theme 1 delivery" in out[head + 2]
    _, plain = synthetic_job(30, seed=2)
    assert not any(line.startswith("ID  BROAD") for line in themes_table(plain).splitlines())
