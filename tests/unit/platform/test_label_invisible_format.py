"""A label of format characters alone, or with a Unicode line or paragraph separator, is no visible text on one
line either (audit41): review41's rule took "\\u200b" (a zero-width space), a BOM or a word joiner as a label, which
every export shows as a blank theme name, and "Late\\u2028delivery", which JavaScript, Excel and str.splitlines()
break in two. Zero-width joiners inside visible text stay (emoji sequences, Persian's ZWNJ), and a served codebook
still goes back as seed_themes whatever its stored labels hold."""

from __future__ import annotations

from typing import Any

import pytest

from shared.platform import Platform
from tests.support.direct import body_of
from tests.unit.platform.test_theme_edit_labels import _edit, _labels, _plant

BAD = ["\u200b", "\u200b\ufeff", "\u2060 ", "\u200d", "Late\u2028delivery", "Late\u2029delivery"]


@pytest.mark.parametrize("label", BAD, ids=repr)
def test_a_label_of_format_characters_or_with_a_line_separator_is_a_422(platform: Platform, label: str) -> None:
    job_id = _plant(platform)
    before = _labels(job_id)
    resp = _edit(job_id, [{"op": "rename", "theme": "t1", "label": label}])
    assert resp.status_code == 422, resp.get_body()
    assert [e["field"] for e in body_of(resp)["errors"]] == ["edits[0].label"]
    assert _labels(job_id) == before


@pytest.mark.parametrize("label", ["\U0001f469\u200d\U0001f4bb Developers", "می\u200cخواهم", "Late\u200bdelivery"])
def test_joiners_inside_visible_text_are_taken(platform: Platform, label: str) -> None:
    job_id = _plant(platform)
    resp = _edit(job_id, [{"op": "rename", "theme": "t1", "label": label}])
    assert resp.status_code == 200, resp.get_body()
    assert label in _labels(job_id)


def test_a_served_codebook_goes_back_whatever_its_labels_hold() -> None:
    from pipelines.thematic import codebook
    from pipelines.thematic.params import SeedTheme

    doc: dict[str, Any] = {"themes": [{"id": "t1", "label": "\u200b\ufeff", "keywords": []},
                                      {"id": "t2", "label": "Late\u2028delivery"}]}
    assert [entry["name"] for entry in codebook.codebook(doc)] == ["t1", "Late delivery"]
    for entry in codebook.codebook(doc):
        SeedTheme.model_validate(entry)
