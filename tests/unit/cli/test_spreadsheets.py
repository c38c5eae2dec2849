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
    assert items[0]["metadata"] == {"Submitted": "2026-11-03T09:30:00", "Score": 3}  # numbers as numbers (review44)
    assert items[1]["metadata"]["Score"] == 9 and items[2]["metadata"]["Score"] == ""
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


def test_the_cli_row_cap_is_the_servers() -> None:
    from pipelines.thematic.params import MAX_RESPONSES as SERVER
    from thematiq_cli.inputs import MAX_RESPONSES

    assert MAX_RESPONSES == SERVER


def _write_sheet(path: Path, sheet_xml: bytes, extra: dict[str, bytes] | None = None) -> Path:
    """A minimal workbook written part by part, so a test controls the sheet XML (and can make it huge)."""
    import zipfile

    parts = {
        "[Content_Types].xml": b'<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/'
        b'content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships'
        b'+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/xl/workbook.xml" '
        b'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/><Override '
        b'PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.'
        b'spreadsheetml.worksheet+xml"/></Types>',
        "_rels/.rels": b'<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/'
        b'relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
        b'relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>',
        "xl/workbook.xml": b'<?xml version="1.0"?><workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/'
        b'2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet '
        b'name="Responses" sheetId="1" r:id="rId1"/></sheets></workbook>',
        "xl/_rels/workbook.xml.rels": b'<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/'
        b'package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/'
        b'officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/></Relationships>',
        "xl/worksheets/sheet1.xml": sheet_xml,
        **(extra or {}),
    }
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in parts.items():
            z.writestr(name, data)
    return path


def _sheet(rows: bytes, dimension: str = "") -> bytes:
    dim = f'<dimension ref="{dimension}"/>'.encode() if dimension else b""
    return (b'<?xml version="1.0"?><worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">'
            + dim + b"<sheetData>" + rows + b"</sheetData></worksheet>")


def _rows(n: int, start: int = 1) -> bytes:
    return b"".join(b'<row r="%d"><c r="A%d" t="inlineStr"><is><t>answer %d</t></is></c></row>' % (i, i, i)
                    for i in range(start, start + n))


def test_a_sheet_with_more_responses_than_a_job_takes_is_refused_while_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from thematiq_cli import inputs

    monkeypatch.setattr(inputs, "MAX_RESPONSES", 1000)  # the server's 100,000, scaled down to keep the test quick
    seen: list[object] = []
    cell_text = inputs._cell_text
    monkeypatch.setattr(inputs, "_cell_text", lambda v: seen.append(v) or cell_text(v))
    header = b'<row r="1"><c r="A1" t="inlineStr"><is><t>text</t></is></c></row>'
    ok = _write_sheet(tmp_path / "ok.xlsx", _sheet(header + _rows(1000, start=2)))
    assert len(load_responses(ok)) == 1000  # exactly the limit is fine
    big = _write_sheet(tmp_path / "big.xlsx", _sheet(header + _rows(200_000, start=2)))
    seen.clear()
    with pytest.raises(InputError, match=r"big\.xlsx has more than 1,000 responses"):
        load_responses(big)
    assert len(seen) <= 1000 + 21  # stopped at the cap: the other 198,979 rows were never read


def test_a_zip_bomb_is_refused_before_it_is_inflated(tmp_path: Path) -> None:
    from thematiq_cli.inputs import MAX_XLSX_INFLATED_BYTES

    # One part of zeros that deflates about 1000:1: a few hundred KiB on disk, over the cap when inflated.
    bomb = _write_sheet(tmp_path / "bomb.xlsx", _sheet(_rows(3)), {"xl/media/pad.bin": bytes(MAX_XLSX_INFLATED_BYTES)})
    assert bomb.stat().st_size < 2**20
    with pytest.raises(InputError, match=r"bomb\.xlsx inflates to 128 MiB, more than the 128 MiB"):
        load_responses(bomb)


def test_a_declared_dimension_of_a_million_rows_is_not_padded_out(tmp_path: Path) -> None:
    header = b'<row r="1"><c r="A1" t="inlineStr"><is><t>text</t></is></c></row>'
    f = _write_sheet(tmp_path / "dim.xlsx", _sheet(header + _rows(3, start=2), dimension="A1:A1048576"))
    assert [r["text"] for r in load_responses(f)] == ["answer 2", "answer 3", "answer 4"]
    far = _write_sheet(tmp_path / "far.xlsx", _sheet(header + _rows(1, start=1_048_576)))
    with pytest.raises(InputError, match=r"far\.xlsx: row 400,001 is past the 400,000 rows"):
        load_responses(far)
