"""The theme count and both levels on the job page (headless Chromium, local host, Azurite): the count in a
researcher's words ("16 themes in 8 groups; the data also support 11 themes. ...") with why, the broad themes
(parents) with their counts and themes, and sub-theme shares rounded once from their counts (review44)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from devhost.process import HostProcess
from tests.e2e.conftest import Api
from tests.e2e.ui.test_dashboard import open_ui
from thematiq_cli.inputs import load_responses

SAMPLE = Path(__file__).resolve().parents[3] / "samples" / "feedback.csv"


def _serve(page: Any, job_id: str, doc: dict[str, Any]) -> None:
    page.route(f"**/api/jobs/{job_id}/result*",
               lambda route: route.fulfill(status=200, content_type="application/json", body=json.dumps(doc)))


def test_the_count_in_words_and_the_broad_themes_are_shown_as_the_result_has_them(page: Any, host: HostProcess,
                                                                                  api: Api) -> None:
    # The page showed "Count confidence: medium (0.59); the 11-theme readings fit about as well · 8 broad themes, 16
    # themes." and no broad theme with its count: the 8 groups the summary names were nowhere on it.
    job = api.wait(api.submit("thematic", {"llm": "off"}, load_responses(SAMPLE))["id"], timeout=240)
    assert job["status"] == "succeeded", job
    _, _, doc = api.call("GET", f"/api/jobs/{job['id']}/result")
    tc = doc["run"]["theme_count"]
    assert doc["levels"]["broad"] == "parents" and doc["parents"], doc["levels"]  # the sample has > 12 themes
    open_ui(page, host, api, f"#/jobs/{job['id']}")
    expect(page.locator("#count-summary")).to_have_text(f"Theme count: {tc['summary']}", timeout=30000)
    why = page.locator("#count-why")
    why.locator("summary").click()
    expect(why.locator("p")).to_have_text(tc["explanation"].removeprefix(f"{tc['summary']} Why: "))
    rows = page.locator("table.broad-themes tbody tr")
    expect(rows).to_have_count(len(doc["parents"]))
    labels = {t["id"]: t["label"] for t in doc["themes"]}
    usable = doc["run"]["counts"]["usable"]
    for p in doc["parents"]:
        cells = page.locator(f"table.broad-themes tr[data-parent-id='{p['id']}']").locator("th, td")
        expect(cells).to_have_text([p["label"], str(p["count"]), f"{100 * p['count'] / usable:.1f}%",
                                    ", ".join(labels[c] for c in p["children"])])


def test_multi_label_broad_theme_counts_are_what_theme_p1_lists_and_the_caption_says_so(page: Any, host: HostProcess,
                                                                                      api: Api) -> None:
    # multi_label: a broad theme counted its responses' primary themes only, where theme=p1 lists a response with
    # any theme in it (the sample: 128 against 131 for the largest); the caption said "its count is its responses'".
    job = api.wait(api.submit("thematic", {"llm": "off", "multi_label": True}, load_responses(SAMPLE))["id"],
                   timeout=240)
    assert job["status"] == "succeeded", job
    _, _, doc = api.call("GET", f"/api/jobs/{job['id']}/result")
    multi = sum(1 for a in doc["assignments"] if len(a["themes"]) > 1)
    assert doc["levels"]["broad"] == "parents" and multi
    for p in doc["parents"]:
        _, _, listed = api.call("GET", f"/api/jobs/{job['id']}/responses?theme={p['id']}&limit=1")
        assert listed["total"] == p["count"], p["id"]
    open_ui(page, host, api, f"#/jobs/{job['id']}")
    caption = page.locator("table.broad-themes caption")
    expect(caption).to_contain_text("its count is the responses with any of its themes", timeout=30000)
    expect(caption).to_contain_text(f"({multi} responses have more than one theme")
    for p in doc["parents"]:
        expect(page.locator(f"table.broad-themes tr[data-parent-id='{p['id']}'] td").first).to_have_text(str(p["count"]))


def test_a_compared_jobs_count_and_sub_theme_shares(page: Any, host: HostProcess, api: Api) -> None:
    # A compared job's count is the earlier codebook's (criterion fixed, no confidence): the page said nothing of it.
    # A sub-theme's share was the stored 4-decimal share rounded again (5 of 401: "1.3%", the report's 1.2 %).
    items = load_responses(SAMPLE)[:120]
    job = api.wait(api.submit("thematic", {"llm": "off", "num_themes": 3}, items)["id"], timeout=240)
    assert job["status"] == "succeeded", job
    _, _, real = api.call("GET", f"/api/jobs/{job['id']}/result")
    doc = copy.deepcopy(real)
    summary = "3 themes: the compared job's codebook and 0 new (compare_to c0ffee), so both waves are counted on one instrument."
    doc["run"]["theme_count"] = {**doc["run"]["theme_count"], "criterion": "fixed", "summary": summary,
                                 "explanation": f"{summary} Why: this wave's own clustering reads 4 themes"}
    for k in ("confidence", "confidence_label", "alternatives"):
        doc["run"]["theme_count"].pop(k, None)
    t = doc["themes"][0]
    doc["levels"] = {**doc["levels"], "broad": "themes", "fine": "subthemes"}
    doc["run"]["counts"]["usable"] = 401
    doc["subthemes"] = [{**{k: v for k, v in t.items() if k not in ("subthemes", "parent", "sentiment")},
                         "id": f"{t['id']}.1", "parent": t["id"], "label": "Cold fries", "count": 5, "share": 0.0125}]
    _serve(page, job["id"], doc)
    open_ui(page, host, api, f"#/jobs/{job['id']}")
    expect(page.locator("#count-summary")).to_have_text(f"Theme count: {summary}", timeout=30000)
    page.locator(f"li.theme[data-theme-id='{t['id']}'] .theme-head").click()
    expect(page.locator(f"li[data-subtheme-id='{t['id']}.1']")).to_have_text("Cold fries — 5 (1.2%)")
    expect(page.locator("table.broad-themes")).to_have_count(0)


def test_the_sentiment_sources_note_is_on_the_page_not_only_in_a_tooltip(page: Any, host: HostProcess,
                                                                         api: Api) -> None:
    # review44: sentiment.note (the model fell back to the lexicon: in another language every answer scores
    # neutral; or the LLM left responses to the lexicon) was only the title of "sentiment: the lexicon", shown on
    # hover, where the Markdown report prints it.
    job = api.wait(api.submit("thematic", {"llm": "off", "num_themes": 2}, load_responses(SAMPLE)[:60])["id"],
                   timeout=240)
    assert job["status"] == "succeeded", job
    _, _, doc = api.call("GET", f"/api/jobs/{job['id']}/result")
    note = ("sentiment-minilm reads only the fast encoder's vectors; this job was embedded by USE multilingual v3, so "
            "the lexicon (vader) scored it; the lexicon knows English words only")
    doc["sentiment"] = {**doc["sentiment"], "source": "lexicon", "note": note}
    _serve(page, job["id"], doc)
    open_ui(page, host, api, f"#/jobs/{job['id']}")
    expect(page.locator("#sentiment-note")).to_have_text(f"Sentiment: {note}.", timeout=30000)


def test_after_a_merge_the_count_says_what_the_edit_left(page: Any, host: HostProcess, api: Api) -> None:
    # review44: the count summary is the analysis's ("16 themes in 8 groups"); after a merge the page listed 15
    # themes under it with nothing saying why the two differ.
    job = api.wait(api.submit("thematic", {"llm": "off"}, load_responses(SAMPLE))["id"], timeout=240)
    assert job["status"] == "succeeded", job
    _, headers, doc = api.call("GET", f"/api/jobs/{job['id']}/result")
    ids = [t["id"] for t in doc["themes"]]
    status, _, body = api.call("PATCH", f"/api/jobs/{job['id']}/themes", {"edits": [{"op": "merge", "themes": ids[:2]}]},
                               headers={"if-match": headers["etag"]})
    assert status == 200, body
    _, _, doc = api.call("GET", f"/api/jobs/{job['id']}/result")
    k, groups = len(doc["themes"]), doc["levels"]["broad_count"]
    assert k == len(ids) - 1
    open_ui(page, host, api, f"#/jobs/{job['id']}")
    expect(page.locator("#count-summary")).to_have_text(
        f"Theme count: {doc['run']['theme_count']['summary']} After 1 codebook edit (merge, split or delete): "
        f"{k} themes in {groups} groups.", timeout=30000)


def test_the_families_of_a_comparison_are_on_the_page(page: Any, host: HostProcess, api: Api) -> None:
    # review44: comparison.groups (each family of near earlier themes tested as one share; the only test of a theme
    # a codebook split took out of the per-theme rows) was stored and shown by no view.
    job = api.wait(api.submit("thematic", {"llm": "off", "num_themes": 3}, load_responses(SAMPLE)[:90])["id"],
                   timeout=240)
    assert job["status"] == "succeeded", job
    _, _, doc = api.call("GET", f"/api/jobs/{job['id']}/result")
    ids = [t["id"] for t in doc["themes"]]
    rows = [{"theme_id": t["id"], "label": t["label"], "share_then": 0.2, "share_now": 0.3, "change": 0.1, "p": 0.2,
             "q": 0.3, "significant": False, "count_then": 20, "count_now": 27, "status": "kept"} for t in doc["themes"]]
    doc["comparison"] = {"job_id": "a" * 28, "n_then": 100, "n_now": 90, "themes": rows, "new": [], "gone": [],
                         "then": {"t9": {"label": "Gone since", "count": 5}}, "testing": {"procedure": "bh"},
                         "groups": [{"family": "f1", "theme_ids": [ids[0], "t9"], "count_then": 40, "count_now": 60,
                                     "share_then": 0.4, "share_now": 0.6667, "change": 0.2667, "p": 0.0004,
                                     "q": 0.0008, "significant": True, "weight": 1.0, "test": "fisher"}]}
    _serve(page, job["id"], doc)
    open_ui(page, host, api, f"#/jobs/{job['id']}")
    row = page.locator("table.families tbody tr[data-family='f1']")
    expect(row.locator("th, td")).to_have_text([f"{doc['themes'][0]['label']} + Gone since", "40.0%", "66.7%",
                                                "+26.7 pts * (exact)"], timeout=30000)
    expect(row.locator("td.sig")).to_have_count(1)


def test_the_count_names_its_other_readings_once(page: Any, host: HostProcess, api: Api) -> None:
    # followup44r: "Count confidence: medium (0.59); the 17-theme readings fit about as well" stood under "Theme
    # count: 10 themes in 2 groups; the data also support 17 themes.": the summary (schema 1.2) names them.
    job = api.wait(api.submit("thematic", {"llm": "off", "num_themes": 2}, load_responses(SAMPLE)[:60])["id"],
                   timeout=240)
    assert job["status"] == "succeeded", job
    _, _, doc = api.call("GET", f"/api/jobs/{job['id']}/result")
    summary = "2 themes; the data also support 17 themes."
    doc["run"]["theme_count"] = {**doc["run"]["theme_count"], "criterion": "fine", "confidence_label": "medium",
                                 "confidence": 0.59, "alternatives": [17], "summary": summary,
                                 "explanation": f"{summary} Why: a fine level."}
    _serve(page, job["id"], doc)
    open_ui(page, host, api, f"#/jobs/{job['id']}")
    expect(page.locator("#count-summary")).to_have_text(f"Theme count: {summary}", timeout=30000)
    expect(page.locator(".count-confidence")).to_contain_text("Count confidence: medium (0.59)")
    expect(page.locator(".count-confidence")).not_to_contain_text("17")


def test_a_requested_count_states_no_confidence(page: Any, host: HostProcess, api: Api) -> None:
    # review46: num_themes=2 read "Count confidence: high (1.00)" (CountChoice's defaults), as if the data had chosen
    # the two themes; the count was the client's. The levels stay on the line.
    job = api.wait(api.submit("thematic", {"llm": "off", "num_themes": 2}, load_responses(SAMPLE)[:60])["id"],
                   timeout=240)
    assert job["status"] == "succeeded", job
    _, _, doc = api.call("GET", f"/api/jobs/{job['id']}/result")
    tc = doc["run"]["theme_count"]
    assert tc["criterion"] == "fixed" and tc["confidence"] is None and tc["confidence_label"] is None, tc
    open_ui(page, host, api, f"#/jobs/{job['id']}")
    note = page.locator(".count-confidence")
    expect(note).to_contain_text("Theme count requested (num_themes), not chosen by the data", timeout=30000)
    expect(note).not_to_contain_text("Count confidence")
    expect(note).to_contain_text(f"{doc['levels']['broad_count']} broad themes")


def test_a_compared_jobs_count_is_the_codebooks_not_a_request(page: Any, host: HostProcess, api: Api) -> None:
    # review46u: a job with compare_to (num_themes "auto", never sent) read "Theme count requested (num_themes), not
    # chosen by the data": its count is the earlier job's codebook (criterion fixed), as the summary above it says.
    job = api.wait(api.submit("thematic", {"llm": "off", "num_themes": 2}, load_responses(SAMPLE)[:60])["id"],
                   timeout=240)
    assert job["status"] == "succeeded", job
    _, _, doc = api.call("GET", f"/api/jobs/{job['id']}/result")
    summary = f"2 themes: the compared job's codebook (compare_to {'a' * 28}), so both waves are counted on one instrument."
    doc["run"]["theme_count"] = {**doc["run"]["theme_count"], "criterion": "fixed", "confidence": None,
                                 "confidence_label": None, "summary": summary,
                                 "explanation": f"{summary} Why: the codebook fixes the count."}
    # A compared job has one level (as the stored one had): it read "2 broad themes, 2 themes".
    doc["levels"] = {"broad": "themes", "fine": "themes", "broad_count": 2, "fine_count": 2}
    _serve(page, job["id"], doc)
    open_ui(page, host, api, f"#/jobs/{job['id']}")
    note = page.locator(".count-confidence")
    expect(note).to_contain_text("Theme count fixed by the compared job's codebook (compare_to), not chosen by the data",
                                 timeout=30000)
    expect(note).not_to_contain_text("num_themes")
    expect(note).to_contain_text("one level: 2 themes, no broad themes or sub-themes")
    expect(note).not_to_contain_text("broad themes,")
