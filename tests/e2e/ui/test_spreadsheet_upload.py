"""The dashboard reads spreadsheets in the browser: an .xlsx survey (sheet and column choice, a title row, blank rows)
and a Windows-1252 CSV, submitted through the form; a bad id names its row and column."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from devhost.process import HostProcess
from tests.e2e.conftest import Api
from tests.unit.cli.test_spreadsheets import ACCENTED, make_xlsx


def _open_new(page: Any, host: HostProcess, api: Api) -> list[dict[str, Any]]:
    page.goto(f"{host.url}/api/ui?code={api.key}#/new")
    page.wait_for_selector("#responses-file")
    posted: list[dict[str, Any]] = []
    page.on("request", lambda r: posted.append(json.loads(r.post_data))
            if r.method == "POST" and r.url.split("?")[0].endswith("/api/jobs") else None)
    return posted


def _refusal(page: Any, host: HostProcess, api: Api, path: Path) -> str:
    """Choose ``path`` in the form; the text of the alert that refuses it."""
    _open_new(page, host, api)
    page.set_input_files("#responses-file", str(path))
    alert = page.locator("[role=alert]")
    alert.wait_for()
    return str(alert.inner_text())


def _submit_and_wait(page: Any, posted: list[dict[str, Any]], api: Api) -> dict[str, Any]:
    page.click("#submit-job")
    page.wait_for_url("**#/jobs/*", timeout=60_000)
    assert posted, "the form did not submit"
    job_id = page.url.rsplit("/", 1)[-1]
    assert api.job(job_id)["pipeline"] == "thematic"
    return posted[-1]


def test_xlsx_with_sheet_and_column_choice(page: Any, host: HostProcess, api: Api, tmp_path: Path) -> None:
    rows: list[list[object]] = [["Customer survey, Q4 export"], [], ["Respondent", "Channel", "What could we do better?"]]
    rows += [[f"r{i}", "web", t] for i, t in enumerate(ACCENTED)]
    rows.insert(5, [None, None, None])  # a blank row in the middle
    f = make_xlsx(tmp_path / "survey.xlsx", rows)
    posted = _open_new(page, host, api)
    page.set_input_files("#responses-file", str(f))
    # The first sheet ("Notes") has one line: pick the survey's sheet.
    page.wait_for_selector("#sheet", state="visible")
    page.select_option("#sheet", "Responses")
    expect(page.locator("#file-info")).to_contain_text("(Responses)")
    assert page.locator("#text-column").input_value() == "What could we do better?"
    page.select_option("#id-column", "Respondent")
    body = _submit_and_wait(page, posted, api)
    assert [(i["id"], i["text"]) for i in body["input"]] == [(f"r{i}", t) for i, t in enumerate(ACCENTED)]
    # Without an id column the ids are row numbers under the header (the blank row counts).
    posted2 = _open_new(page, host, api)
    page.set_input_files("#responses-file", str(f))
    page.select_option("#sheet", "Responses")
    expect(page.locator("#file-info")).to_contain_text("(Responses)")
    page.select_option("#id-column", "")
    assert [i["id"] for i in _submit_and_wait(page, posted2, api)["input"]] == [1, 2, 4]


def test_cp1252_csv_and_a_bad_id_named_by_row_and_column(page: Any, host: HostProcess, api: Api,
                                                        tmp_path: Path) -> None:
    f = tmp_path / "windows.csv"
    f.write_bytes(("id;comment\r\n" + "".join(f"c{i};{t}\r\n" for i, t in enumerate(ACCENTED))).encode("cp1252"))
    posted = _open_new(page, host, api)
    page.set_input_files("#responses-file", str(f))
    expect(page.locator("#file-info")).to_contain_text("3 rows")
    assert page.locator("#text-column").input_value() == "comment"
    body = _submit_and_wait(page, posted, api)
    assert [(i["id"], i["text"]) for i in body["input"]] == [(f"c{i}", t) for i, t in enumerate(ACCENTED)]

    bad = tmp_path / "bad.csv"
    bad.write_text("id,comment\na,fine\n,no id\n", encoding="utf-8")
    _open_new(page, host, api)
    page.set_input_files("#responses-file", str(bad))
    expect(page.locator("#file-info")).to_contain_text("2 rows")
    page.click("#submit-job")
    alert = page.locator("[role=alert]")
    alert.wait_for()
    assert 'line 3, column "id": the id is empty' in alert.inner_text()


def test_a_zip_bomb_and_a_lying_zip_directory_are_refused(page: Any, host: HostProcess, api: Api,
                                                          tmp_path: Path) -> None:
    import struct

    from tests.unit.cli.test_spreadsheets import _rows, _sheet, _write_sheet

    # Declared over the cap: refused from the directory, before anything is inflated.
    bomb = _write_sheet(tmp_path / "bomb.xlsx", _sheet(_rows(3)), {"xl/media/pad.bin": bytes(200 * 2**20)})
    assert "inflates to 200 MiB, more than the 128 MiB" in _refusal(page, host, api, bomb)

    # A directory that says the sheet is 100 bytes while it inflates to 16 MiB: the inflate stops at the lie.
    padded = _sheet(b" " * (16 * 2**20) + _rows(3))
    liar = _write_sheet(tmp_path / "liar.xlsx", padded)
    data = bytearray(liar.read_bytes())
    entry = data.rindex(b"PK\x01\x02", 0, data.rindex(b"xl/worksheets/sheet1.xml"))
    struct.pack_into("<I", data, entry + 24, 100)  # the central directory's uncompressed size
    liar.write_bytes(bytes(data))
    assert "xl/worksheets/sheet1.xml inflates to more than the workbook's ZIP directory says" in _refusal(page, host, api, liar)


def test_a_csv_quote_never_closed_is_refused_naming_its_line(page: Any, host: HostProcess, api: Api,
                                                            tmp_path: Path) -> None:
    # The parser used to read from the stray quote to the end of the file as one cell: "2 rows", the second holding
    # every later line. A quote inside an unquoted cell stays a character, as the CLI's reader (Python's csv) has it.
    bad = tmp_path / "stray.csv"
    bad.write_text('id,comment\na,it is 5" long\nb,"opens here\nc,and swallows\nd,the rest\n', encoding="utf-8")
    assert "line 3: a quoted cell opens here and is never closed" in _refusal(page, host, api, bad)
    fine = tmp_path / "fine.csv"
    fine.write_text('id,comment\na,it is 5" long\nb,"two\nlines"\n', encoding="utf-8")
    posted = _open_new(page, host, api)
    page.set_input_files("#responses-file", str(fine))
    expect(page.locator("#file-info")).to_contain_text("2 rows")
    body = _submit_and_wait(page, posted, api)
    assert [(i["id"], i["text"]) for i in body["input"]] == [("a", 'it is 5" long'), ("b", "two\nlines")]


def test_a_column_name_twice_in_the_header_is_refused_naming_both_columns(page: Any, host: HostProcess, api: Api,
                                                                       tmp_path: Path) -> None:
    # Records are keyed by column name: the later "plan" replaced the earlier one, a column of answers lost.
    bad = tmp_path / "twice.csv"
    bad.write_text("id,comment,plan,plan\na,fine,pro,free\n", encoding="utf-8")
    assert "line 1: the header has \"plan\" twice (columns 3 and 4); rename one" in _refusal(page, host, api, bad)
    f = make_xlsx(tmp_path / "twice.xlsx", [["text", "Plan", "id", "Plan"], ["a", "x", "1", "y"]], extra_sheet=False)
    assert "row 1: the header has \"Plan\" twice (columns B and D); rename one" in _refusal(page, host, api, f)


def test_a_wrapped_header_codes_and_long_numbers_are_sent_as_the_file_has_them(page: Any, host: HostProcess, api: Api,
                                                                             tmp_path: Path) -> None:
    # review44: a survey export's wrapped question ("How likely\nare you to recommend us?") became a metadata key
    # with a line break, which the service refuses (422 on input[0].metadata; the CLI folds it into one space); a
    # column of codes with leading zeros went as numbers ("01234" -> 1234) and a 19-digit account number was rounded
    # (…6789 -> …6800): both are text, as the CLI reads them. A plain number column still goes as numbers.
    f = tmp_path / "export.csv"
    f.write_text('id;comment;"How likely\nare you to recommend us?";store;account\n'
                 "a;Late again;9;01234;1234567890123456789\n"
                 "b;Cold food;3;00077;9876543210987654321\n", encoding="utf-8-sig")
    posted = _open_new(page, host, api)
    page.set_input_files("#responses-file", str(f))
    expect(page.locator("#file-info")).to_contain_text("2 rows")
    key = "How likely are you to recommend us?"
    for c in (key, "store", "account"):
        page.check(f"#metadata-columns input[value='{c}']")
    body = _submit_and_wait(page, posted, api)
    assert [i["metadata"] for i in body["input"]] == [
        {key: 9, "store": "01234", "account": "1234567890123456789"},
        {key: 3, "store": "00077", "account": "9876543210987654321"}]
