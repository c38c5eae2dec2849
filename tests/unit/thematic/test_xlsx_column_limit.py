"""The Responses sheet stays within Excel's 16,384 columns (review41): a job whose responses held 17,000 metadata keys
got a sheet to column YDI, which Excel refuses to open without "repairing" (dropping) it. The keys past the limit
go, per row, into one last ``metadata_other`` column as JSON (as ``thematiq responses`` writes its CSV)."""

from __future__ import annotations

import io
import json
import re
import zipfile

from pipelines.thematic.xlsx import EXCEL_MAX_COLUMNS, render_xlsx
from tests.support.synthetic_result import synthetic_job


def _sheet_xml(body: bytes, n: int) -> str:
    return zipfile.ZipFile(io.BytesIO(body)).read(f"xl/worksheets/sheet{n}.xml").decode()


def _col(letters: str) -> int:
    n = 0
    for ch in letters:
        n = n * 26 + ord(ch) - 64
    return n


def test_metadata_past_the_column_limit_goes_into_one_json_column() -> None:
    items, doc = synthetic_job(10, seed=1, impact=False)
    items[0]["metadata"] = {"metadata_other": "a key of that name", **{f"k{j}": j for j in range(17_000)}}
    items[1]["metadata"] = {"k16999": "last"}
    _, body = render_xlsx(doc, items)
    import openpyxl

    ws = openpyxl.load_workbook(io.BytesIO(body))["Responses"]
    assert max(_col(c) for c in re.findall(r'<c r="([A-Z]+)\d+"', _sheet_xml(body, 2))) <= EXCEL_MAX_COLUMNS
    header = [c.value for c in ws[1]]
    assert len(header) == EXCEL_MAX_COLUMNS and len(set(header)) == len(header)
    assert header[-1] == "metadata_other"
    first, second = ([c.value for c in ws[row]] for row in (2, 3))
    kept = header.index("k0")
    assert first[kept] == 0
    # Every key not given a column is in the row's JSON, with its value; the kept ones are not repeated there.
    other = json.loads(first[-1])
    assert set(other) == {f"k{j}" for j in range(17_000)} - set(header) and other["k16999"] == 16999
    assert first[header.index("metadata.metadata_other")] == "a key of that name"
    assert json.loads(second[-1]) == {"k16999": "last"}


def test_a_few_keys_keep_a_column_each_and_no_extra_column() -> None:
    items, doc = synthetic_job(10, seed=1, impact=False)
    _, body = render_xlsx(doc, items)
    import openpyxl

    header = [c.value for c in openpyxl.load_workbook(io.BytesIO(body))["Responses"][1]]
    assert "metadata_other" not in header
