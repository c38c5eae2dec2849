"""``thematiq responses -f csv`` names every broad theme a response is in (multi_label), as the service's CSV does.

Until 2026-12-08 its one ``broad`` column held the primary theme's broad theme only, so a response coded with t2
(in p1) and t6 (in p2) read as p1's alone, while the service's CSV (a row per theme, ``broad_id``) and
``theme=p2`` counted it in p2 too.
"""

from __future__ import annotations

import csv
import io

from pipelines.thematic import codebook
from pipelines.thematic.render import render_csv
from pipelines.thematic.verbatims import page
from shared.sdk import ResponseQuery
from tests.unit.thematic.test_verbatims import _with_parents
from thematiq_cli.render import write_responses


def _cli_csv(rows: list[dict]) -> list[dict[str, str]]:
    out = io.StringIO()
    write_responses(iter(rows), "csv", out)
    return list(csv.DictReader(io.StringIO(out.getvalue())))


def test_every_broad_theme_of_a_response_as_the_service_csv_and_theme_filter_count_it() -> None:
    items, doc = _with_parents()
    codebook._recount(doc)
    served = [r.model_dump(mode="json") for r in page(doc, items, ResponseQuery({}, {}, 0, 1000)).items]
    # The rows the route serves carry each theme's broad theme; the primary's is the row's broad.
    multi = [r for r in served if len({t["broad"]["id"] for t in r["themes"]}) > 1]
    assert len(multi) >= 5  # 29 of the 200 have two themes, 5 of them in both broad themes
    assert all(r["themes"][0]["broad"] == r["broad"] for r in served if r["themes"])
    cli = _cli_csv(served)
    service = list(csv.DictReader(render_csv(doc, items)[1].decode().splitlines()))
    for p in doc["parents"]:
        in_cli = {r["response_id"] for r in cli if p["id"] in r["broad_ids"].split(";")}
        assert in_cli == {r["response_id"] for r in service if r["broad_id"] == p["id"]}
        assert in_cli == {str(r.id) for r in page(doc, items, ResponseQuery({"theme": p["id"]}, {}, 0, 1000)).items}
        assert len(in_cli) == p["count"]
    labels = {p["id"]: p["label"] for p in doc["parents"]}
    for r, row in zip(served, cli, strict=True):
        ids = list(dict.fromkeys(t["broad"]["id"] for t in r["themes"]))
        assert row["broad_ids"] == ";".join(ids) and row["broad_labels"] == ";".join(labels[i] for i in ids)
        assert row["theme_ids"] == ";".join(t["theme_id"] for t in r["themes"])


def test_broad_labels_are_formula_safe_and_an_older_service_s_row_still_gives_its_broad_theme() -> None:
    rows = [{"id": "1", "text": "t", "bucket": "theme", "metadata": {},
             "themes": [{"theme_id": "t1", "label": "A", "confidence": 0.9, "broad": {"id": "p1", "label": "=1+1"}},
                        {"theme_id": "t5", "label": "B", "confidence": 0.5, "broad": {"id": "p2", "label": "@x"}}],
             "broad": {"id": "p1", "label": "=1+1"}, "fine": {"id": "t1", "label": "A"}, "sentiment": None},
            # A service before 2026-12-08: no themes[].broad, the row's broad only.
            {"id": "2", "text": "t", "bucket": "theme", "metadata": {},
             "themes": [{"theme_id": "t2", "label": "C", "confidence": 0.9}], "broad": {"id": "p1", "label": "P"},
             "fine": None, "sentiment": None}]
    got = _cli_csv(rows)
    assert [(r["broad_ids"], r["broad_labels"]) for r in got] == [("p1;p2", "'=1+1;@x"), ("p1", "P")]
