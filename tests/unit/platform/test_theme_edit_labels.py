"""A theme's new label is visible text (review41): ``PATCH /api/jobs/{id}/themes`` took a label of spaces, a NUL or
a line break (and the same in a description or a split's keyword), stored it, and every export showed a blank or
broken theme name; such an edit is a 422 naming the field, and the result is unchanged. The field is the edit's
own (``edits[0].label``), not the name pydantic gives the union member (``edits[0].rename.label``)."""

from __future__ import annotations

from typing import Any

import pytest

from shared.platform import Platform
from tests.support.direct import body_of, http
from tests.support.synthetic_result import planted_job, synthetic_job


def _plant(platform: Platform) -> str:
    return planted_job(platform)


def _edit(job_id: str, edits: list[dict[str, Any]]) -> Any:
    result = http("get_job_result", "GET", f"jobs/{job_id}/result", route_params={"id": job_id})
    assert result.status_code == 200, result.get_body()
    return http("edit_job_themes", "PATCH", f"jobs/{job_id}/themes", route_params={"id": job_id},
                headers={"If-Match": result.headers["ETag"]}, body={"edits": edits})


def _labels(job_id: str) -> list[str]:
    result = http("get_job_result", "GET", f"jobs/{job_id}/result", route_params={"id": job_id})
    return [t["label"] for t in body_of(result)["themes"]]


BAD = [" ", "\t", "\u3000", "late\x00", "a\nb", "a\rb", "\x1b[31mred", "\u202eevil", "a\u0085b"]


@pytest.mark.parametrize("label", BAD, ids=repr)
@pytest.mark.parametrize(("edit", "field"), [
    ({"op": "rename", "theme": "t1"}, "edits[0].label"),
    ({"op": "merge", "themes": ["t1", "t2"]}, "edits[0].label"),
    ({"op": "split", "theme": "t1", "keyword": "late"}, "edits[0].label"),
])
def test_a_label_that_is_no_visible_text_is_a_422_naming_it(
    platform: Platform, edit: dict[str, Any], field: str, label: str
) -> None:
    job_id = _plant(platform)
    before = _labels(job_id)
    resp = _edit(job_id, [{**edit, "label": label}])
    assert resp.status_code == 422, resp.get_body()
    assert resp.mimetype == "application/problem+json"
    assert [e["field"] for e in body_of(resp)["errors"]] == [field]
    assert _labels(job_id) == before  # nothing changed


@pytest.mark.parametrize(("edit", "field"), [
    ({"op": "rename", "theme": "t1", "label": "Late", "description": "bad\x00"}, "edits[0].description"),
    ({"op": "split", "theme": "t1", "keyword": "la\x00te", "label": "Late"}, "edits[0].keyword"),
    ({"op": "rename", "theme": "t1", "label": ""}, "edits[0].label"),
    ({"op": "delete"}, "edits[0].theme"),
])
def test_other_bad_fields_of_an_edit_are_named_without_the_ops_name(
    platform: Platform, edit: dict[str, Any], field: str
) -> None:
    resp = _edit(_plant(platform), [edit])
    assert resp.status_code == 422, resp.get_body()
    assert [e["field"] for e in body_of(resp)["errors"]] == [field]


@pytest.mark.parametrize("label", ["Late delivery", "Livraison tardive", "配送の遅れ", "=SUM(A1)", "<b>x</b>"])
def test_a_visible_label_is_taken_as_sent(platform: Platform, label: str) -> None:
    job_id = _plant(platform)
    resp = _edit(job_id, [{"op": "rename", "theme": "t1", "label": label,
                           "description": "Two lines:\nfirst, then\tsecond."}])
    assert resp.status_code == 200, resp.get_body()
    assert label in _labels(job_id)


@pytest.mark.parametrize("name", BAD, ids=repr)
def test_a_seed_theme_name_that_is_no_visible_text_is_a_422_naming_it(platform: Platform, name: str) -> None:
    # A seed theme's name is the label of the theme it seeds: the same rule as an edit's label.
    items, _ = synthetic_job(10, seed=10, impact=False)
    resp = http("submit_job", "POST", "jobs", body={
        "pipeline": "thematic", "params": {"llm": "off", "seed_themes": [{"name": "Late"}, {"name": name}]},
        "input": items})
    assert resp.status_code == 422, resp.get_body()
    assert [e["field"] for e in body_of(resp)["errors"]] == ["params.seed_themes[1].name"]
    assert platform.service.list("local", {})[0] == []


def test_a_served_codebook_can_be_sent_back_whatever_its_labels_held() -> None:
    # A label stored before this rule (or an LLM's) may hold a line break: the codebook's name shows it as a space.
    from pipelines.thematic import codebook
    from pipelines.thematic.params import SeedTheme

    doc = {"themes": [{"id": "t1", "label": "Late\ndelivery\x00", "keywords": []}, {"id": "t2", "label": "\n"}]}
    names = [entry["name"] for entry in codebook.codebook(doc)]
    assert names == ["Late delivery", "t2"]
    for entry in codebook.codebook(doc):
        SeedTheme.model_validate(entry)
