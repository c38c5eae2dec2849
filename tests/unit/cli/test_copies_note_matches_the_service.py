"""Copies counted as respondents (``run.counts.duplicates``, schema 1.4) are said where the usable count is: in the
Markdown report and in the CLI's themes table. The CLI stands alone (it must not import the service's pipelines),
so its sentence is a copy, held equal to the service's here."""

from __future__ import annotations

from typing import Any

import pytest

from pipelines.thematic.render import copies_note, render_md
from thematiq_cli.render import copies_note as cli_copies_note
from thematiq_cli.render import themes_table


@pytest.mark.parametrize("n", [1, 2, 40])
def test_the_cli_says_what_the_report_says(n: int) -> None:
    assert cli_copies_note(n) == copies_note(n)
    assert ("1 copy of" in copies_note(n)) == (n == 1)


def _doc(duplicates: int | None) -> dict[str, Any]:
    counts: dict[str, Any] = {"responses": 50, "usable": 48, "themed": 40, "other": 8,
                              "unusable": {"empty": 2, "gibberish": 0, "exact_duplicate": 0, "near_duplicate": 0}}
    if duplicates is not None:
        counts["duplicates"] = duplicates
    return {"themes": [], "assignments": [], "run": {"counts": counts}}


@pytest.mark.parametrize("duplicates", [None, 0, 7])
def test_the_report_and_the_table_say_it_only_when_there_are_copies(duplicates: int | None) -> None:
    md = render_md(_doc(duplicates))[1].decode()
    table = themes_table(_doc(duplicates))
    said = copies_note(7)
    assert (said in md) == (said in table) == (duplicates == 7)
