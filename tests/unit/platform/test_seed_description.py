"""A seed theme's description takes what a codebook edit's does (review46): no NUL, control or direction override.

``params.SeedTheme.description`` took any string, where the edit's (``codebook.Rename``) refuses those, so
``"a\\u202eb"`` was stored at submission and shown reordered; a served codebook, whose descriptions quote answers
(and so may hold such characters), has them as spaces, so it still goes back as ``seed_themes`` as it is.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from pipelines.thematic.codebook import codebook
from pipelines.thematic.params import SeedTheme
from shared.platform import Platform
from tests.support.direct import body_of, http

_ITEMS = [{"id": i, "text": t} for i, t in enumerate(["late delivery", "late delivery", "rude courier"])]


def _submit(seed: dict[str, Any]) -> Any:
    body = {"pipeline": "thematic", "params": {"llm": "off", "seed_themes": [seed]}, "input": _ITEMS}
    return http("submit_job", "POST", "jobs", raw=json.dumps(body).encode("utf-8"))


@pytest.mark.parametrize("description", ["a\u202eb", "x\x00y", "bell\x07", "\u2066isolate\u2069"], ids=repr)
def test_a_seed_description_with_an_invisible_character_is_a_422_naming_it(platform: Platform, description: str) -> None:
    resp = _submit({"name": "Late", "description": description})
    assert resp.status_code == 422, resp.get_body()
    assert resp.mimetype == "application/problem+json"
    assert [e["field"] for e in body_of(resp)["errors"]] == ["params.seed_themes[0].description"]
    assert platform.service.list("local", {})[0] == []  # nothing stored


def test_a_seed_description_keeps_its_line_breaks_and_tabs(platform: Platform) -> None:
    resp = _submit({"name": "Late", "description": "late or slow\n\tnot cold"})
    assert resp.status_code == 202, resp.get_body()
    assert body_of(resp)["params"]["seed_themes"][0]["description"] == "late or slow\n\tnot cold"


def test_a_served_codebook_goes_back_as_seed_themes_though_its_description_quoted_a_nul() -> None:
    doc = {"themes": [{"id": "t1", "label": "Cold food", "count": 3, "keywords": ["cold"],
                       "description": "Responses about cold food, such as \u201c\x00=1+1 Food arrived cold\u201d.",
                       "quotes": [{"text": "\x00=1+1 Food arrived cold"}]}]}
    [entry] = codebook(doc)
    assert "\x00" not in entry["description"]
    SeedTheme.model_validate(entry)
