"""Every column of a CSV or xlsx export has a header of its own (review41): a metadata key named like a fixed column
(``text``) became ``metadata.text``, and a second key that *was* ``metadata.text`` kept its name, so the export had
two ``metadata.text`` columns (and ``thematiq responses`` a second ``metadata_other``); a reader (pandas, Excel's
tables) could not tell them apart. A renamed key is prefixed again until its name is no column's and no key's."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest

from pipelines.thematic.render import CSV_COLUMNS, metadata_columns, render_csv
from tests.support.synthetic_result import synthetic_job
from thematiq_cli.render import write_responses

CASES = [
    ["text", "metadata.text"],
    ["metadata.text", "text"],
    ["text", "metadata.text", "metadata.metadata.text"],
    ["theme_id", "metadata.theme_id", "plan"],
    ["metadata_other", "response_id", "metadata.response_id"],
]


@pytest.mark.parametrize("keys", CASES)
def test_metadata_columns_are_unique_and_keep_a_free_name(keys: list[str]) -> None:
    fixed = (*CSV_COLUMNS, "text")
    names = metadata_columns(keys, fixed)
    assert len(set(names)) == len(names) and not set(names) & set(fixed)
    for key, name in zip(keys, names, strict=True):
        assert name == key if key not in fixed else name.endswith(key)


def test_the_service_csv_has_one_header_per_column() -> None:
    items, doc = synthetic_job(20, seed=2, impact=False)
    for item in items:
        item["metadata"] = {"text": "A", "metadata.text": "B"}
    header = next(csv.reader(io.StringIO(render_csv(doc, items)[1].decode("utf-8-sig"))))
    assert len(set(header)) == len(header), header
    rows = list(csv.DictReader(io.StringIO(render_csv(doc, items)[1].decode("utf-8-sig"))))
    assert {r["metadata.text"] for r in rows} == {"B"} and {r["metadata.metadata.text"] for r in rows} == {"A"}


@pytest.mark.parametrize("keys", CASES)
def test_the_cli_csv_has_one_header_per_column(keys: list[str]) -> None:
    rows: list[dict[str, Any]] = [{"id": "1", "text": "t", "bucket": "theme", "themes": [],
                                   "metadata": {k: i for i, k in enumerate(keys)}}]
    out = io.StringIO()
    write_responses(iter(rows), "csv", out)
    header = next(csv.reader(io.StringIO(out.getvalue())))
    assert len(set(header)) == len(header), header


@pytest.mark.parametrize("keys", CASES)
def test_the_cli_names_columns_as_the_service_does(keys: list[str]) -> None:
    # The CLI stands alone (it must not import the service's pipelines), so its rule is a copy, held equal here.
    from thematiq_cli.render import metadata_columns as cli_metadata_columns

    for fixed in ((*CSV_COLUMNS, "text"), ("response_id", "text", "metadata_other")):
        assert cli_metadata_columns(keys, fixed) == metadata_columns(keys, fixed)
