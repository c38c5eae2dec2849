"""Spreadsheet input: .xlsx (openpyxl, read-only) and CSV in cp1252 and UTF-16 with a BOM (no host needed)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import openpyxl
import pytest

from thematiq_cli.inputs import InputError, load_responses

ACCENTED = ["Café au lait was cold – again", "Très bien, merci", "Naïve pricing… €20 is too much"]


def make_xlsx(path: Path, rows: list[list[object]], sheet: str = "Responses", extra_sheet: bool = True) -> Path:
    wb = openpyxl.Workbook()
    if extra_sheet:
        wb.active.title = "Notes"
        wb.active.append(["exported by SurveyTool"])
        ws = wb.create_sheet(sheet)
    else:
        ws = wb.active
        ws.title = sheet
    for row in rows:
        ws.append(row)
    wb.save(path)
    return path


def test_xlsx_sheet_title_rows_blank_rows_and_columns(tmp_path: Path) -> None:
    f = make_xlsx(tmp_path / "survey.xlsx", [
        ["Customer survey Q4"],                                   # a title row above the header
        [],
        ["Respondent", "Submitted", "What could we do better?", "Score"],
        ["r-1", datetime(2026, 11, 3, 9, 30), ACCENTED[0], 3],
        [None, None, None, None],                                 # a blank row
        ["r-2", datetime(2026, 11, 4), ACCENTED[1], 9.0],
        ["r-3", None, ACCENTED[2], None],
    ])
    items = load_responses(f, column="What could we do better?", id_column="respondent", sheet="Responses")
    assert [i["id"] for i in items] == ["r-1", "r-2", "r-3"]
    assert [i["text"] for i in items] == ACCENTED
    assert items[0]["metadata"] == {"Submitted": "2026-11-03T09:30:00", "Score": "3"}
    assert items[1]["metadata"]["Score"] == "9"
    # Without an id column, ids are row numbers under the header (the blank row counts: ids point back).
    assert [i["id"] for i in load_responses(f, column="What could we do better?", sheet="2")] == [1, 3, 4]


def test_xlsx_errors_name_the_row_and_column(tmp_path: Path) -> None:
    f = make_xlsx(tmp_path / "bad.xlsx", [["id", "comment"], ["a", "fine"], [None, "no id here"]], extra_sheet=False)
    with pytest.raises(InputError, match=r"row 3, column A \('id'\): the id is empty"):
        load_responses(f)
    dup = make_xlsx(tmp_path / "dup.xlsx", [["id", "comment"], ["a", "x"], ["a", "y"]], extra_sheet=False)
    with pytest.raises(InputError, match=r"row 3, column A \('id'\): id 'a' was already used in row 2"):
        load_responses(dup)
    with pytest.raises(InputError, match=r"no worksheet 'Nope'.*the sheets are: Responses"):
        load_responses(f, sheet="Nope")
    with pytest.raises(InputError, match="no text column 'answer'; the columns are: id, comment"):
        load_responses(f, column="answer")
    (tmp_path / "fake.xlsx").write_bytes(b"id,text\n1,a\n")
    with pytest.raises(InputError, match=r"is not an \.xlsx workbook"):
        load_responses(tmp_path / "fake.xlsx")


def test_csv_in_cp1252_and_utf16_with_bom(tmp_path: Path) -> None:
    text = "id;comment\n" + "".join(f"c{i};{t}\n" for i, t in enumerate(ACCENTED, start=1))
    for name, data in (
        ("windows.csv", text.replace("\n", "\r\n").encode("cp1252")),
        ("unicode.csv", text.replace(";", "\t").encode("utf-16")),          # Excel "Unicode text": BOM + UTF-16LE
        ("utf8bom.csv", "\ufeff".encode() + text.encode("utf-8")),
    ):
        (tmp_path / name).write_bytes(data)
        items = load_responses(tmp_path / name)
        assert [i["text"] for i in items] == ACCENTED, name
        assert [i["id"] for i in items] == ["c1", "c2", "c3"]
    # An explicit encoding wins.
    (tmp_path / "latin.csv").write_bytes("text\nÉté\n".encode("latin-1"))
    assert load_responses(tmp_path / "latin.csv", encoding="latin-1")[0]["text"] == "Été"


def test_csv_errors_name_the_line_and_column(tmp_path: Path) -> None:
    f = tmp_path / "e.csv"
    f.write_text("Survey export\n\nid,text\n1,a\n,b\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"line 5, column 'id': the id is empty"):
        load_responses(f)
