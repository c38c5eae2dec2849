"""``thematiq responses --format csv``: metadata numbers stay numbers, strings go through the formula guard."""

from __future__ import annotations

import csv
import io

from thematiq_cli.render import write_responses


def test_a_numeric_metadata_value_is_written_as_a_number_and_a_string_one_formula_safe() -> None:
    # A JSON number cannot carry a formula: -3 stays -3 (before, Excel showed the text '-3).
    rows = [{"id": str(i), "text": "t", "bucket": "theme", "themes": [], "metadata": {"delta": v}}
            for i, v in enumerate((-3, -0.5, 2.0, "-3+A1", "=1+1", True))]
    out = io.StringIO()
    assert write_responses(iter(rows), "csv", out) == 6
    got = [r["delta"] for r in csv.DictReader(io.StringIO(out.getvalue()))]
    assert got == ["-3", "-0.5", "2", "'-3+A1", "'=1+1", "true"]


def test_a_list_or_object_metadata_value_is_written_as_json_not_python() -> None:
    rows = [{"id": str(i), "text": "t", "bucket": "theme", "themes": [], "metadata": {"tags": v}}
            for i, v in enumerate((["a", "b"], {"x": None, "y": True}))]
    out = io.StringIO()
    write_responses(iter(rows), "csv", out)
    assert [r["tags"] for r in csv.DictReader(io.StringIO(out.getvalue()))] == ['["a", "b"]', '{"x": null, "y": true}']
