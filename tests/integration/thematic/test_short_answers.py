"""Short real answers and explicit non-answers through the whole pipeline (real embedded model, fake context)."""

from __future__ import annotations

import csv
import io
import random

import pytest

from pipelines.thematic import PIPELINE, ThematicParams
from pipelines.thematic.clean import REASONS
from pipelines.thematic.render import render_md
from pipelines.thematic.result import ThematicResult
from tests.support.thematic_data import feedback
from tests.support.thematic_fakes import FakeContext

TV = ["The TV app {adj} buffers during live football", "Streaming to my smart TV is {adj} choppy",
      "The TV channel list is {adj} short", "Casting to the TV {adj} drops the picture",
      "No TV guide for tonight's shows, {adj} annoying"]


def test_no_answers_are_reported_as_such_and_a_short_real_answer_is_themed() -> None:
    items, _ = feedback(per_theme=15)
    rng = random.Random(1)
    for i in range(15):
        text = TV[i % len(TV)].format(adj=rng.choice(["really", "always", "so", "very", "often"]))
        items.append({"id": f"tv{i}", "text": f"{text} (#{i})"})
    items += [{"id": "na1", "text": "N/A"}, {"id": "na2", "text": "n/a"}, {"id": "na3", "text": "None."},
              {"id": "na4", "text": "-"}, {"id": "tv", "text": "TV"}, {"id": "mash", "text": "qwerty123"}]
    doc = PIPELINE.run(FakeContext(), ThematicParams(llm="off", min_theme_size=3), PIPELINE.validate_input(items))
    ThematicResult.model_validate(doc)
    by_id = {a["response_id"]: a for a in doc["assignments"]}
    # Before: "N/A" and "n/a" were ok (the second a near duplicate of the first), "None." was themed, "-" and
    # "TV" were gibberish, "qwerty123" was ok.
    for rid in ("na1", "na2", "na3", "na4"):
        assert (by_id[rid]["bucket"], by_id[rid]["reason"], by_id[rid]["duplicate_of"]) == ("unusable", "no_answer",
                                                                                             None)
    assert by_id["mash"]["reason"] == "gibberish"
    # "TV" is coded with the answers about TV.
    assert by_id["tv"]["bucket"] == "theme" and by_id["tv"].get("reason") is None
    primary = {rid: a["themes"][0]["theme_id"] for rid, a in by_id.items() if a["themes"]}
    members = [rid for rid, t in primary.items() if t == primary["tv"] and rid != "tv"]
    assert members and all(str(rid).startswith("tv") for rid in members), members
    unusable = doc["run"]["counts"]["unusable"]
    assert list(unusable) == list(REASONS) and unusable["no_answer"] == 4 and unusable["gibberish"] == 1
    # Every export names the reason.
    _, body = PIPELINE.exports["csv"](doc, items)
    rows = {r["response_id"]: r for r in csv.DictReader(io.StringIO(body.decode()))}
    assert rows["na1"]["reason"] == "no_answer" and rows["tv"]["bucket"] == "theme"
    assert "- no answer: 4" in render_md(doc)[1].decode()
    openpyxl = pytest.importorskip("openpyxl")
    sheet = openpyxl.load_workbook(io.BytesIO(PIPELINE.exports["xlsx"](doc, items)[1]))["Responses"]
    header = [c.value for c in next(sheet.iter_rows(max_row=1))]
    reasons = {row[0]: row[header.index("reason")] for row in sheet.iter_rows(min_row=2, values_only=True)}
    assert reasons["na1"] == "no_answer" and reasons["tv"] is None
