"""The join of input and result behind the responses route and the exports, on a result with broad themes
(more than 12 themes: parents above, themes as the fine level), where the filters and columns change meaning."""

from __future__ import annotations

import io
from typing import Any

import pytest

from pipelines.thematic.insight import meta_text
from pipelines.thematic.verbatims import page
from pipelines.thematic.xlsx import render_xlsx
from shared.sdk import ResponseQuery, ValidationFailed
from tests.support.synthetic_result import synthetic_job


def _with_parents() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    items, doc = synthetic_job(200, themes=8, seed=4)
    # Two broad themes over the eight: p1 = t1..t4, p2 = t5..t8; the fine level is then the themes.
    doc["parents"] = [{"id": "p1", "label": "Broad one", "keywords": [], "count": 0, "children": ["t1", "t2", "t3", "t4"]},
                      {"id": "p2", "label": "Broad two", "keywords": [], "count": 0, "children": ["t5", "t6", "t7", "t8"]}]
    doc["subthemes"] = []
    doc["levels"] = {"broad": "parents", "fine": "themes", "broad_count": 2, "fine_count": 8}
    for t in doc["themes"]:
        t["parent"] = "p1" if int(t["id"][1:]) <= 4 else "p2"
        t["subthemes"] = []
    for a in doc["assignments"]:
        if a["bucket"] == "theme":
            primary = a["themes"][0]["theme_id"]
            a["broad"], a["fine"] = ("p1" if int(primary[1:]) <= 4 else "p2"), primary
    return items, doc


def _q(**filters: str) -> ResponseQuery:
    meta = {k[9:-1]: v for k, v in filters.items() if k.startswith("metadata[")}
    return ResponseQuery({k: v for k, v in filters.items() if not k.startswith("metadata[")}, meta, 0, 1000)


def test_a_broad_theme_matches_every_child_and_the_fine_level_is_the_theme() -> None:
    items, doc = _with_parents()
    by_id = {a["response_id"]: a for a in doc["assignments"]}
    got = [r.id for r in page(doc, items, _q(theme="p1")).items]
    want = [it["id"] for it in items
            if any(int(t["theme_id"][1:]) <= 4 for t in by_id[it["id"]]["themes"])]
    assert got == want and got
    # The fine level is the themes: subtheme=t6 is theme t6's responses, a secondary one's too, as theme=t6 and
    # the theme's count have them (it matched the primary theme only, so a multi-label job's t6 lost rows).
    rows = page(doc, items, _q(subtheme="t6")).items
    assert [r.id for r in rows] == [r.id for r in page(doc, items, _q(theme="t6")).items]
    assert len(rows) == sum(1 for a in doc["assignments"] for t in a["themes"] if t["theme_id"] == "t6")
    assert any(r.fine is not None and r.fine.id != "t6" for r in rows)  # secondary: its fine is its primary
    primary = [r for r in rows if r.themes[0].theme_id == "t6"]
    assert primary and all(r.fine is not None and r.fine.id == "t6" and r.broad is not None and r.broad.id == "p2"
                           and r.broad.label == "Broad two" for r in primary)
    with pytest.raises(ValidationFailed) as err:
        page(doc, items, _q(subtheme="t6.1"))  # no sub-themes in this result
    assert err.value.errors[0]["field"] == "subtheme"


def test_paging_positions_and_total() -> None:
    items, doc = _with_parents()
    everything = page(doc, items, ResponseQuery({"theme": "t2"}, {}, 0, 1000)).items
    first = page(doc, items, ResponseQuery({"theme": "t2"}, {}, 0, 3))
    assert [r.id for r in first.items] == [r.id for r in everything[:3]] and first.total == len(everything)
    assert first.next_start is not None
    second = page(doc, items, ResponseQuery({"theme": "t2"}, {}, first.next_start, 3))
    assert [r.id for r in second.items] == [r.id for r in everything[3:6]]
    last = page(doc, items, ResponseQuery({"theme": "t2"}, {}, 0, len(everything)))
    assert last.next_start is None, "no empty last page"


@pytest.mark.parametrize(("value", "text"), [(7, "7"), (7.0, "7"), (7.5, "7.5"), (True, "true"), (None, ""),
                                             ("pro", "pro"), (["a", "b"], '["a", "b"]'),
                                             ({"x": None, "y": True}, '{"x": null, "y": true}')])
def test_metadata_values_compare_as_written(value: Any, text: str) -> None:
    assert meta_text(value) == text


def test_xlsx_gives_broad_columns_when_the_broad_level_is_parents() -> None:
    openpyxl = pytest.importorskip("openpyxl")
    items, doc = _with_parents()
    _, body = render_xlsx(doc, items)
    wb = openpyxl.load_workbook(io.BytesIO(body), read_only=True)
    rows = list(wb["Responses"].iter_rows(values_only=True))
    header = list(rows[0])
    assert "broad_id" in header and "fine_id" not in header
    by_id = {a["response_id"]: a for a in doc["assignments"]}
    col = header.index("broad_label")
    for r in rows[1:]:
        a = by_id[r[0]]
        assert r[col] == ({"p1": "Broad one", "p2": "Broad two"}.get(a.get("broad") or ""))
    # A broad theme's responses are those with it in broad_id or other_broad_ids (multi_label), as theme=p1 has them.
    other = header.index("other_broad_ids")
    assert other == len(header) - 1  # last: every other column keeps its place
    for p in ("p1", "p2"):
        in_sheet = {r[0] for r in rows[1:] if r[col - 1] == p or p in ((r[other] if len(r) > other else None)
                                                                       or "").split(";")}
        assert in_sheet == {r.id for r in page(doc, items, _q(theme=p)).items}
    assert any(len(r) > other and r[other] for r in rows[1:])
    levels = {r[1] for r in wb["Themes"].iter_rows(min_row=2, values_only=True)}
    assert levels == {"broad", "theme"}


def test_csv_writes_a_numeric_metadata_value_as_a_number_and_a_string_one_formula_safe() -> None:
    # A JSON number cannot carry a formula, so -3 stays -3 (Excel reads it as a number); the text "-3+A1" is
    # prefixed as before. Before, a negative number became the text '-3 in Excel.
    import csv

    from pipelines.thematic.render import render_csv

    items, doc = synthetic_job(4, seed=1)
    for it, v in zip(items, (-3, -0.5, "-3+A1", "=1+1"), strict=True):
        it["metadata"] = {"delta": v}
    rows = list(csv.DictReader(io.StringIO(render_csv(doc, items)[1].decode())))
    first = {r["response_id"]: r["delta"] for r in reversed(rows)}
    assert [first[str(it["id"])] for it in items] == ["-3", "-0.5", "'-3+A1", "'=1+1"]


def test_xlsx_keeps_an_integer_excel_cannot_hold_exactly_as_its_digits() -> None:
    # Excel keeps 15 significant digits: a customer number 12345678901234567890 written as a number cell showed
    # (and saved back) as 12345678901234500000. Beyond 15 digits the integer is a text cell of its digits.
    openpyxl = pytest.importorskip("openpyxl")
    items, doc = synthetic_job(4, seed=2)
    values = (12345678901234567890, -(10**15), 999_999_999_999_999, 10**400)
    for it, v in zip(items, values, strict=True):
        it["metadata"] = {"customer": v}
    items[0]["id"] = 2**60  # an id given as a number, likewise
    for a in doc["assignments"]:
        if a["response_id"] == "r0":
            a["response_id"] = str(2**60)
    wb = openpyxl.load_workbook(io.BytesIO(render_xlsx(doc, items)[1]), read_only=True)
    rows = list(wb["Responses"].iter_rows(values_only=True))
    col = list(rows[0]).index("customer")
    got = {str(r[0]): r[col] for r in rows[1:]}
    assert [got[str(it["id"])] for it in items] == [str(values[0]), str(values[1]), values[2], str(values[3])]
    assert rows[1][0] == str(2**60)


def test_csv_writes_a_list_or_object_metadata_value_as_json_not_python() -> None:
    # It wrote Python's repr (['a', 'b'], {'x': None, 'y': True}): no JSON reader takes that back.
    import csv

    from pipelines.thematic.render import render_csv

    items, doc = synthetic_job(2, seed=1)
    items[0]["metadata"] = {"tags": ["a", "b"]}
    items[1]["metadata"] = {"tags": {"x": None, "y": True}}
    rows = list(csv.DictReader(io.StringIO(render_csv(doc, items)[1].decode())))
    first = {r["response_id"]: r["tags"] for r in reversed(rows)}
    assert [first[str(it["id"])] for it in items] == ['["a", "b"]', '{"x": null, "y": true}']


def test_xlsx_of_a_compared_job_has_the_changes_sheet() -> None:
    # The wave-over-wave table (compare_to) was in the report and the dashboard, not in the workbook.
    openpyxl = pytest.importorskip("openpyxl")
    items, doc = synthetic_job(60, themes=3, seed=5)
    rows = [{"theme_id": "t1", "label": "=cmd|' /C calc'!A0", "share_then": 0.1, "share_now": 0.3, "change": 0.2,
             "p": 0.001, "q": 0.003, "significant": True, "count_then": 10, "count_now": 18, "status": "kept"},
            {"theme_id": "t9", "label": "new one", "share_then": None, "share_now": 0.05, "change": None, "p": None,
             "q": None, "significant": False, "count_then": 0, "count_now": 3, "status": "new"}]
    doc["comparison"] = {"job_id": "a" * 28, "n_then": 100, "n_now": 60, "then": {}, "themes": rows, "new": ["t9"],
                         "gone": [], "testing": {"procedure": "bh"}}
    wb = openpyxl.load_workbook(io.BytesIO(render_xlsx(doc, items)[1]))
    assert wb.sheetnames[-1] == "Changes"
    got = [[c.value for c in r] for r in wb["Changes"].iter_rows()]
    got = [r[:2] if i < 5 else r for i, r in enumerate(got)]  # the sheet pads the summary rows to 12 columns
    assert got[:4] == [["job_id", "a" * 28], ["n_then", 100], ["n_now", 60], ["testing", "bh"]]
    assert got[5] == ["theme_id", "label", "status", "count_then", "share_then", "count_now", "share_now", "change",
                      "p", "q", "significant", "test"]
    assert got[6] == ["t1", "=cmd|' /C calc'!A0", "kept", 10, 0.1, 18, 0.3, 0.2, 0.001, 0.003, True, None]
    assert wb["Changes"]["B7"].data_type == "s"  # a label is never a formula
    assert got[7][:4] == ["t9", "new one", "new", 0] and got[7][4] is None


def test_xlsx_breakdowns_sheet_names_each_cells_test() -> None:
    # Schema 1.4: a small cell is tested by Fisher's exact test; the sheet says which test made its p (an older
    # result's cells have no test: the column is empty).
    openpyxl = pytest.importorskip("openpyxl")
    from pipelines.thematic import insight

    items, doc = synthetic_job(60, themes=3, seed=7)
    groups = ["tiny"] * 5 + ["A"] * 100 + ["B"] * 100
    theme_of = ["t1", "t1", "t2", "t2", None] + ["t2"] * 50 + [None] * 50 + ["t2"] * 30 + [None] * 70
    doc["breakdowns"] = [insight.breakdown("seg", groups, theme_of, ["t1", "t2"], kind="categorical"),
                         {**doc["breakdowns"][0]}]
    wb = openpyxl.load_workbook(io.BytesIO(render_xlsx(doc, items)[1]), read_only=True)
    rows = list(wb["Breakdowns"].iter_rows(values_only=True))
    assert rows[0][-3:] == ("test", "small_n", "synthetic")
    col = rows[0].index("test")
    tests = {(r[0], r[2], r[4]): r[col] if len(r) > col else None for r in rows[1:]}
    assert tests[("seg", "tiny", "t1")] == "fisher" and tests[("seg", "A", "t2")] == "z"
    assert {t for (field, _, _), t in tests.items() if field == "plan"} == {None}


def test_xlsx_themes_sheet_gives_a_themes_nps_for_a_zero_to_ten_rating() -> None:
    # sentiment_from a 0-10 rating: the report and the dashboard give each theme's NPS; the sheet had only its mean.
    openpyxl = pytest.importorskip("openpyxl")
    items, doc = synthetic_job(60, themes=3, seed=6)
    for t in doc["themes"]:
        t["sentiment"] = {"positive": 1, "neutral": 0, "negative": 41, "mean": -0.9524, "nps": -95.2}
    wb = openpyxl.load_workbook(io.BytesIO(render_xlsx(doc, items)[1]), read_only=True)
    rows = list(wb["Themes"].iter_rows(values_only=True))
    col = list(rows[0]).index("sentiment_nps")
    assert [r[col] for r in rows[1:] if r[1] == "theme"] == [-95.2] * len(doc["themes"])


#: Text that a spreadsheet may run as a formula, with the full-width forms East Asian input methods type
#: (U+FF1D U+FF0B U+FF0D U+FF20: Excel under a Japanese or Chinese locale takes them as = + - @).
FORMULA_TEXTS = ("=1+1", "+1+1", "-1+1", "@SUM(A1)", "\t=1+1", "\r=1+1", "\uff1d1+1", "\uff0b1+1", "\uff0d1+1",
                 "\uff20SUM(A1)",
                 # Behind what a spreadsheet may drop or skip on the way in (review46): spaces, a NUL or a line feed
                 # (the xlsx writer drops the illegal controls and then checked; the CSV kept "\x00=1+1" bare), a
                 # no-break or zero-width space, a byte-order mark, a direction mark.
                 " =1+1", "  -1+1", "\x00=1+1", "\n=1+1", "\u00a0=1+1", "\u200b@SUM(A1)", "\ufeff=1+1",
                 "\u200e+1+1")


def test_every_export_keeps_a_formula_in_user_text_inert_full_width_forms_too() -> None:
    import csv

    from pipelines.thematic.render import render_csv
    from thematiq_cli.render import write_responses

    items, doc = synthetic_job(len(FORMULA_TEXTS), seed=3)
    for it, v in zip(items, FORMULA_TEXTS, strict=True):
        it["text"], it["metadata"] = v, {"note": v}
    rows = list(csv.DictReader(io.StringIO(render_csv(doc, items)[1].decode())))
    first = {r["response_id"]: r for r in reversed(rows)}
    for it in items:
        got = first[str(it["id"])]
        assert got["text"] == "'" + it["text"] and got["note"] == "'" + it["text"], got
    # The CLI's CSV of the same rows (thematiq responses --format csv) has its own copy of the guard.
    out = io.StringIO()
    write_responses(iter([{"id": str(i), "text": v, "bucket": "theme", "themes": [], "metadata": {"note": v}}
                          for i, v in enumerate(FORMULA_TEXTS)]), "csv", out)
    cli = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert [(r["text"], r["note"]) for r in cli] == [("'" + v, "'" + v) for v in FORMULA_TEXTS]


def test_xlsx_marks_every_formula_like_string_as_quoted_text() -> None:
    # A string cell is text when the workbook opens, but Excel re-reads a cell that is edited (F2, Enter): without
    # the quote prefix "+1+1" or "＝1+1" becomes a formula then; "=..." had the prefix, the others not.
    openpyxl = pytest.importorskip("openpyxl")
    from pipelines.thematic.xlsx import render_xlsx

    items, doc = synthetic_job(len(FORMULA_TEXTS), seed=3)
    for it, v in zip(items, FORMULA_TEXTS, strict=True):
        it["text"] = v
    wb = openpyxl.load_workbook(io.BytesIO(render_xlsx(doc, items)[1]))
    ws = wb["Responses"]
    col = [c.value for c in ws[1]].index("text") + 1
    cells = {ws.cell(row=r, column=col).value: ws.cell(row=r, column=col) for r in range(2, ws.max_row + 1)}
    for v in FORMULA_TEXTS:
        # (openpyxl reads a leading CR back as LF: the XML normalises line ends; a NUL is dropped on the way in.)
        cell = cells[v.replace("\r", "\n").replace("\x00", "")]
        assert cell.data_type == "s" and cell.quotePrefix, v


def test_xlsx_names_each_responses_other_themes_and_keeps_a_formula_like_label_inert() -> None:
    # other_themes held ids only ("t3;t5"): a reader of the sheet had to look each one up on the Themes sheet.
    openpyxl = pytest.importorskip("openpyxl")
    items, doc = synthetic_job(200, themes=8, seed=4)
    doc["themes"][1]["label"] = "=HYPERLINK(\"http://x\")"
    labels = {t["id"]: t["label"] for t in doc["themes"]}
    wb = openpyxl.load_workbook(io.BytesIO(render_xlsx(doc, items)[1]))
    ws = wb["Responses"]
    header = [c.value for c in ws[1]]
    ids_col, names_col = header.index("other_themes"), header.index("other_theme_labels")
    assert names_col == ids_col + 1
    by_id = {str(a["response_id"]): a for a in doc["assignments"]}
    seen = quoted = 0
    for row in ws.iter_rows(min_row=2):
        a = by_id[str(row[0].value)]
        rest = [r["theme_id"] for r in a["themes"][1:]]
        assert (row[ids_col].value or "") == ";".join(rest)
        assert (row[names_col].value or "") == "; ".join(labels[t] for t in rest)
        if doc["themes"][1]["id"] in rest:
            seen += 1
            if rest[0] == doc["themes"][1]["id"]:
                assert row[names_col].data_type == "s" and row[names_col].quotePrefix
                quoted += 1
    assert seen and quoted and sum(1 for a in doc["assignments"] if len(a["themes"]) > 1) > 10


def test_a_breakdowns_cut_label_of_a_long_value_finds_its_groups_responses() -> None:
    # A categorical group is labelled with the value's first 80 characters (insight.bucket); the dashboard offers
    # that label as a segment hint, and metadata[k]=<label> compared it with the whole value: nothing found. Two
    # values alike in their first 80 characters were one group (review43): each now gets as many characters as
    # tell it from the other, and its label finds its responses only.
    from pipelines.thematic.insight import MAX_LABEL_CHARS, bucket
    from pipelines.thematic.verbatims import GROUP_LABEL_CHARS
    from shared.api.responses import MAX_FILTER_CHARS

    assert MAX_LABEL_CHARS == MAX_FILTER_CHARS  # a label is a value the filter takes
    items, doc = synthetic_job(60, seed=5)
    long_a, long_b, exact = "A" * 79 + "x and more words after", "A" * 79 + "x then other words", "B" * 80
    long_c = "C" * 120 + " and so on"
    for n, it in enumerate(items):
        it["metadata"] = {"source": [long_a, long_b, exact, "short", long_c][n % 5]}
    labels = bucket([it["metadata"]["source"] for it in items]).labels
    assert len(set(labels)) == 5  # long_a and long_b are two groups
    assert {len(str(v)) for v in labels} == {82, 80, len("short"), GROUP_LABEL_CHARS}
    for value in (long_a, long_b, long_c):
        group = labels[[it["metadata"]["source"] for it in items].index(value)]
        assert value.startswith(str(group)) and len(str(group)) < len(value)
        got = page(doc, items, _q(**{"metadata[source]": str(group)}))
        assert got.total == labels.count(group) == 12 and got.usable > 0
        assert {r.metadata["source"] for r in got.items} == {value}
    # A value some response has whole is matched whole (no prefix match then), a short one as ever.
    assert page(doc, items, _q(**{"metadata[source]": exact})).total == 12
    assert page(doc, items, _q(**{"metadata[source]": long_a})).total == 12
    assert page(doc, items, _q(**{"metadata[source]": "A" * 79})).total == 0
    # Alike in their first 200 characters: one group, the one merge left (the filter takes no more).
    far = bucket(["D" * 210 + "1", "D" * 210 + "2"]).labels
    assert far[0] == far[1] == "D" * MAX_LABEL_CHARS


def test_xlsx_marks_small_groups_and_impacts_explained_by_other_themes() -> None:
    # Schema 1.5: a small_n group is not tested (its q is empty: the column says why), and with one theme per
    # response a theme starred only against another is explained_by it: the sheet said neither.
    openpyxl = pytest.importorskip("openpyxl")
    from pipelines.thematic import insight

    items, doc = synthetic_job(60, themes=3, seed=7)
    groups = ["tiny"] * 5 + ["A"] * 100 + ["B"] * 100
    theme_of = ["t1", "t1", "t2", "t2", None] + ["t2"] * 50 + [None] * 50 + ["t2"] * 30 + [None] * 70
    doc["breakdowns"] = [insight.breakdown("seg", groups, theme_of, ["t1", "t2"], kind="categorical")]
    doc["impact"] = {"key": "nps", "scale": "numeric", "overall": 7.0, "n": 600, "min_n": 10, "single_label": True,
                     "note": "One theme per response: relative to the other themes.",
                     "themes": [{"theme_id": "t1", "label": "Fees", "n": 90, "score": 4.0, "impact": -0.9,
                                 "ci_low": -1.2, "ci_high": -0.6, "small_n": False},
                                {"theme_id": "t2", "label": "Late", "n": 150, "score": 7.4, "impact": 0.3,
                                 "ci_low": 0.1, "ci_high": 0.5, "small_n": False, "explained_by": ["t1"]}]}
    wb = openpyxl.load_workbook(io.BytesIO(render_xlsx(doc, items)[1]), read_only=True)
    rows = list(wb["Breakdowns"].iter_rows(values_only=True))
    small = {r[2]: r[rows[0].index("small_n")] for r in rows[1:]}
    assert small == {"tiny": True, "A": False, "B": False}
    imp = [list(r) for r in wb["Impact"].iter_rows(values_only=True)]
    head = imp[6]
    assert head[-2:] == ["starred", "explained_by"]
    body = {r[0]: dict(zip(head, r, strict=False)) for r in imp[7:9]}
    assert body["t1"]["starred"] is True and body["t1"].get("explained_by") is None
    assert body["t2"]["starred"] is False and body["t2"]["explained_by"] == "Fees"
    assert imp[-1][:2] == ["note", doc["impact"]["note"]]


def test_a_real_missing_answer_is_filtered_apart_from_the_responses_without_a_value() -> None:
    # A survey's own "(missing)" answer is its own breakdown group (schema 1.6), and metadata[plan]=(missing) finds
    # exactly the responses that gave it, as many as that group's n: never the responses with no plan at all.
    from pipelines.thematic import insight

    items, doc = synthetic_job(300, seed=5)
    for n, it in enumerate(items):
        it["metadata"] = {"plan": ["(missing)", None, "pro"][n % 3]} if n % 5 else {}
    meta = {str(it["id"]): it["metadata"] for it in items}
    usable = [a for a in doc["assignments"] if a["bucket"] != "unusable"]
    labels = insight.pool_small(insight.bucket([meta[str(a["response_id"])].get("plan") for a in usable]).labels)
    b = insight.breakdown("plan", labels, [[r["theme_id"] for r in a["themes"]] for a in usable],
                          [t["id"] for t in doc["themes"]], kind="categorical")
    real = next(g for g in b["groups"] if g["value"] == "(missing)" and g["synthetic"] is None)
    got = page(doc, items, _q(**{"metadata[plan]": "(missing)"}))
    assert got.usable == real["n"] and got.total == sum(1 for it in items if it["metadata"].get("plan") == "(missing)")
    assert all(r.metadata.get("plan") == "(missing)" for r in got.items)


def test_missing_and_other_values_list_a_breakdowns_synthetic_groups_and_nothing_else() -> None:
    # The heat map's "(missing)" and "other values" columns had no filter: metadata[plan]=(missing) is a survey's
    # own answer (schema 1.6), and the pooled rare values were named by no value. missing=KEY and other_values=KEY
    # list them, as many usable ones as the group's n; a real "(missing)" answer is in neither.
    from pipelines.thematic import derive

    items, doc = synthetic_job(400, seed=8)
    rare = [f"rare {k}" for k in range(12)]
    for n, it in enumerate(items):
        it["metadata"]["plan"] = (None if n % 7 == 0 else "(missing)" if n % 7 == 1 else rare[n % 12] if n % 7 == 2
                                  else it["metadata"]["plan"])
        if n % 7 == 0 and n % 2:
            del it["metadata"]["plan"]
    doc["run"]["params"] = {"breakdown_by": ["plan"], "min_group_size": 20}
    meta = {str(it["id"]): it["metadata"] for it in items}
    doc["breakdowns"] = derive.derived(doc, meta, breakdown_by=["plan"]).breakdowns
    n_of = {(g["value"], g["synthetic"]): g["n"] for g in doc["breakdowns"][0]["groups"]}
    assert n_of[("(missing)", "missing")] and n_of[("other values", "other")] and n_of[("(missing)", None)]
    missing = page(doc, items, _q(missing="plan"))
    assert missing.usable == n_of[("(missing)", "missing")]
    assert missing.total == sum(1 for it in items if it["metadata"].get("plan") is None)
    other = page(doc, items, _q(other_values="plan"))
    assert other.total == other.usable == n_of[("other values", "other")]
    assert {r.metadata["plan"] for r in other.items} <= set(rare)
    assert page(doc, items, _q(**{"metadata[plan]": "(missing)"})).usable == n_of[("(missing)", None)]
    with pytest.raises(ValidationFailed) as err:
        page(doc, items, _q(other_values="region"))
    assert err.value.errors[0]["field"] == "other_values" and "breakdowns: plan" in err.value.errors[0]["message"]
    with pytest.raises(ValidationFailed) as err:
        page(doc, items, _q(missing="nope"))
    assert err.value.errors[0]["field"] == "missing"


def test_csv_gives_each_rows_broad_theme_so_it_alone_gives_a_broad_themes_count() -> None:
    # More than 12 themes: the CSV had no broad theme at all (nor a themes table to join), so a researcher could not
    # count a broad theme from it. Each (response, theme) row now names its theme's broad theme; a broad theme's
    # distinct responses are what theme=p1 lists (multi_label: a response counts in each of its themes' broad themes).
    import csv

    from pipelines.thematic import codebook
    from pipelines.thematic.render import render_csv

    items, doc = _with_parents()
    codebook._recount(doc)  # the counts an edit writes (codebook.level_ids)
    rows = list(csv.DictReader(render_csv(doc, items)[1].decode().splitlines()))
    assert list(rows[0])[9] == "text" and list(rows[0])[-2:] == ["broad_id", "broad_label"]
    for p in doc["parents"]:
        ids = {r["response_id"] for r in rows if r["broad_id"] == p["id"]}
        assert ids == {r.id for r in page(doc, items, _q(theme=p["id"])).items}
        assert len(ids) == p["count"]
        assert {r["broad_label"] for r in rows if r["broad_id"] == p["id"]} == {p["label"]}
    _, plain = synthetic_job(30, seed=2)
    assert "broad_id" not in render_csv(plain, items)[1].decode().splitlines()[0]


def test_other_values_of_a_breakdown_made_by_older_rules_is_refused_not_listed_under_its_n() -> None:
    # review45p: the filter regroups with today's rules. A stored "other values" group whose n is not what they
    # pool (a document made by older grouping rules) would list a set the table does not count: a 422 naming it.
    from pipelines.thematic import derive

    items, doc = synthetic_job(300, seed=4)
    rare = [f"rare {k}" for k in range(10)]
    for n, it in enumerate(items):
        it["metadata"]["plan"] = rare[(n // 5) % 10] if n % 5 == 0 else it["metadata"]["plan"]
    doc["run"]["params"] = {"breakdown_by": ["plan"], "min_group_size": 20}
    meta = {str(it["id"]): it["metadata"] for it in items}
    doc["breakdowns"] = derive.derived(doc, meta, breakdown_by=["plan"]).breakdowns
    other = next(g for g in doc["breakdowns"][0]["groups"] if g["synthetic"] == "other")
    assert page(doc, items, _q(other_values="plan")).usable == other["n"] > 0  # today's document: listed
    other["n"] -= 3  # as older rules would have counted it
    with pytest.raises(ValidationFailed) as err:
        page(doc, items, _q(other_values="plan"))
    assert err.value.errors[0]["field"] == "other_values" and "older rules" in err.value.errors[0]["message"]


def test_the_cli_and_the_service_read_the_same_texts_as_formulas() -> None:
    # thematiq_cli may not import the pipeline: its copy of the rule is held equal here (review46).
    from pipelines.thematic.render import formula_like as service
    from thematiq_cli.render import formula_like as cli

    texts = [*FORMULA_TEXTS, "", " ", "\x00", "plain", " plain", "\u200b", "'=1+1", '"=1+1', "1-2", "a=b", "\u3000=1"]
    assert [service(t) for t in texts] == [cli(t) for t in texts]
    assert all(service(t) for t in FORMULA_TEXTS)
    assert not any(service(t) for t in ("", " ", "\x00", "plain", " plain", "\u200b", "'=1+1", '"=1+1', "1-2", "a=b"))



#: Texts that end a field for a reader splitting on ";" as well as "," (LibreOffice Calc's import with both
#: separators ticked), with a formula after it: unquoted, "x;=WEBSERVICE(CHAR(104));y" was the live formula
#: =WEBSERVICE(CHAR(104)) there (LibreOffice 7.4, Evaluate formulas on; review46).
SEMICOLON_TEXTS = ("x;=1+1;y", "x;=WEBSERVICE(CHAR(104));y", "a; +1+1", "ok;@SUM(1)")


def _pieces(line: str) -> list[str]:
    """A CSV line's fields as a reader taking both "," and ";" as separators splits it (quotes honoured)."""
    pieces, inside, cur = [], False, ""
    for ch in line:
        if ch == '"':
            inside = not inside
        if ch in ",;" and not inside:
            pieces.append(cur)
            cur = ""
        else:
            cur += ch
    return [*pieces, cur]


def _number(text: str) -> bool:
    # A computed number ("-0.5778", a sentiment score) is no formula: a spreadsheet reads it as the number.
    try:
        float(text)
    except ValueError:
        return False
    return True


def test_every_csv_export_quotes_a_field_with_a_semicolon_so_no_formula_starts_behind_it() -> None:
    import csv

    from pipelines.thematic.render import formula_like, render_csv
    from thematiq_cli.render import write_responses

    items, doc = synthetic_job(len(SEMICOLON_TEXTS), seed=3)
    for it, v in zip(items, SEMICOLON_TEXTS, strict=True):
        it["text"], it["metadata"] = v, {"note": v}
    service = render_csv(doc, items)[1].decode()
    out = io.StringIO()
    write_responses(iter([{"id": str(i), "text": v, "bucket": "theme", "themes": [], "metadata": {"note": v}}
                          for i, v in enumerate(SEMICOLON_TEXTS)]), "csv", out)
    for text in (service, out.getvalue()):
        cells = [c for r in csv.reader(io.StringIO(text)) for c in r]
        assert all(v in cells for v in SEMICOLON_TEXTS)  # a comma reader reads the texts as they were
        for line in text.splitlines():
            assert not any(formula_like(p) and not _number(p) for p in _pieces(line)), line


def test_the_csv_writers_write_what_csv_writer_does_but_quote_a_semicolon() -> None:
    # Only a field with a ";" differs from csv.writer's QUOTE_MINIMAL: the header, ids and numbers keep their bytes.
    import csv

    from pipelines.thematic.render import CsvWriter
    from thematiq_cli.render import _CsvWriter

    rows = [["response_id", "theme_id", "confidence"], ["r1", "t1", "0.912"], ["a,b", 'say "hi"', "x\r\ny"],
            ["", None, "-0.5"], [*FORMULA_TEXTS], ["ü ✓ 日本", "\u200b", " lead"]]
    want = io.StringIO()
    csv.writer(want, lineterminator="\r\n").writerows(rows)
    for writer in (CsvWriter, _CsvWriter):
        got = io.StringIO()
        w = writer(got)
        for r in rows:
            w.writerow(r)
        assert got.getvalue() == want.getvalue()
        semi = io.StringIO()
        writer(semi).writerow(["r1", "x;=1+1;y", "ok"])
        assert semi.getvalue() == 'r1,"x;=1+1;y",ok\r\n'
