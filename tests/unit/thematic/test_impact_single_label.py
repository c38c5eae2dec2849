"""Impact with one theme per response says how to read it (stats44, review43: ``impact.single_label``, ``note``).

Thematic's definition is kept (overall minus the score without the theme). With one theme per response the "without"
side of a theme holds every other theme, so one theme far below lifts the others' impacts: by hand below, a theme
that scores exactly like another unaffected one has impact +1, not 0. The result now says so.
"""

from __future__ import annotations

from pipelines.thematic import impact
from pipelines.thematic.result import Impact

THEMES = [{"id": "a", "label": "A"}, {"id": "b", "label": "B"}, {"id": "c", "label": "C"}]


def test_one_theme_per_response_is_flagged_with_a_note_and_the_definition_is_unchanged() -> None:
    # a: 2, 2, 2, 2; b and c: 8 each. Overall 72 / 12 = 6; without c: (8 + 32) / 8 = 5, so c's impact is 6 - 5 = +1,
    # b's the same; without a: 64 / 8 = 8, so a's is 6 - 8 = -2.
    values = [2] * 4 + [8] * 8
    themes = [["a"]] * 4 + [["b"]] * 4 + [["c"]] * 4
    doc = impact.impact(values, themes, THEMES, key="csat", scale="numeric")
    by = {r["theme_id"]: r["impact"] for r in doc["themes"]}
    assert by == {"a": -2.0, "b": 1.0, "c": 1.0}
    assert doc["single_label"] is True and doc["note"] == impact.SINGLE_LABEL_NOTE
    assert "relative to the other themes together" in doc["note"]
    Impact.model_validate(doc)


def test_a_response_with_two_themes_or_a_single_theme_gives_no_note() -> None:
    values = [2] * 4 + [8] * 8
    multi = [["a"]] * 4 + [["b", "c"]] * 4 + [["c"]] * 4
    doc = impact.impact(values, multi, THEMES, key="csat", scale="numeric")
    assert doc["single_label"] is False and doc["note"] is None
    # One theme (and unthemed responses): "the others" is only "no theme"; nothing to say.
    one = impact.impact(values, [["a"]] * 4 + [[]] * 8, THEMES, key="csat", scale="numeric")
    assert one["single_label"] is False and one["note"] is None
    assert impact.impact([], [], THEMES, key="csat", scale="numeric")["single_label"] is False
