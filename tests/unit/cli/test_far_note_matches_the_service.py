"""The far answers of an inherit comparison in one sentence, in the Markdown report and in ``thematiq changes``.

``comparison.far`` (how many of the new wave's answers are unlike every earlier theme) was stored since schema 1.2
and shown nowhere, so a topic emerging below the size of a new theme was invisible. The CLI stands alone (it must
not import the service's pipelines), so its sentence is a copy, held equal to the service's here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pipelines.thematic.render import FAR_TYPICAL, far_note, render_md
from thematiq_cli.render import comparison_table
from thematiq_cli.render import far_note as cli_far_note

ROW = {"theme_id": "t1", "label": "Late delivery", "status": "kept", "share_then": 0.2, "share_now": 0.1,
       "change": -0.1, "p": 0.01, "q": 0.02, "significant": True}
NEW = {"theme_id": "t9", "label": "Crypto", "status": "new", "share_then": None, "share_now": 0.03,
       "change": None, "p": None, "q": None, "significant": False}
CASES: list[dict[str, Any]] = [
    {"far": 52, "n_now": 2110, "themes": [ROW]},
    {"far": 140, "n_now": 2250, "themes": [ROW, NEW]},
    {"far": 140, "n_now": 2250, "themes": [ROW, NEW, {**NEW, "theme_id": "t10"}]},
    {"far": 0, "n_now": 300, "themes": []},
    {"far": None, "n_now": 300, "themes": [ROW]},  # discover mode: no instrument, no far count
    {"n_now": 300, "themes": [ROW]},  # an older result
    {"far": 3, "n_now": 0, "themes": []},
    {"far": "3", "n_now": 10, "themes": []},
]


@pytest.mark.parametrize("cmp", CASES, ids=repr)
def test_the_cli_says_what_the_report_says(cmp: dict[str, Any]) -> None:
    assert cli_far_note(cmp) == far_note(cmp)


def test_the_sentence_gives_the_count_its_share_and_the_null() -> None:
    assert far_note(CASES[0]) == (
        "52 of the 2110 answers now (2.5%) are far from every earlier theme (an unchanged wave has 2-5 % at about "
        "2,100 answers a wave, 3-13 % at 200-350); too few cluster together to form a new theme, the rest are coded "
        "to their nearest earlier theme or to no theme.")
    assert "form the 1 new theme," in (far_note(CASES[1]) or "")
    assert "form the 2 new themes," in (far_note(CASES[2]) or "")
    assert far_note(CASES[4]) is None and far_note(CASES[5]) is None and far_note(CASES[6]) is None


def test_report_and_changes_show_it() -> None:
    cmp = {"job_id": "j1", "n_then": 2000, "mode": "inherit", "instrument": "centroids", **CASES[1]}
    assert "140 of the 2250 answers now (6.2%) are far" in comparison_table(cmp)
    doc = {"themes": [], "comparison": {**cmp, "then": {}, "new": ["t9"], "gone": []}}
    assert "140 of the 2250 answers now (6.2%) are far" in render_md(doc)[1].decode()


def test_the_null_is_given_for_a_small_wave_too() -> None:
    # review46u: two random halves of samples/feedback.csv (~200 answers each, the same survey: an unchanged wave)
    # had 25 of 200 far (12.5 %), and the sentence said "an unchanged wave has 2-5 %", measured at ~2,110 a wave:
    # a researcher read a null wave as a topic emerging. The null depends on the wave's size; both are named.
    note = far_note({"far": 25, "n_now": 200, "n_then": 199, "themes": [ROW]}) or ""
    assert "(12.5%)" in note
    assert "an unchanged wave has 2-5 %)" not in note
    assert "2-5 % at about 2,100 answers a wave, 3-13 % at 200-350" in note


def test_the_dashboard_gives_the_same_null() -> None:
    # web/static/app.js farNote is a third copy of the sentence (the page has no access to the service's module).
    app = (Path(__file__).resolve().parents[3] / "web" / "static" / "app.js").read_text(encoding="utf-8")
    assert f"(an unchanged wave has {FAR_TYPICAL});" in app
