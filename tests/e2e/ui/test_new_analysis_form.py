"""Issue 23, part 5: the New analysis form sends what the insight views need (headless Chromium, local host,
Azurite): metadata columns, breakdown_by, a score and its scale, the sentiment source and compare_to picked
from the tenant's earlier jobs; the job's result then has them, with the driver chart on the job page. A score
column that is not a number is a 422 naming params.score.key, shown in the form, and nothing is stored."""

from __future__ import annotations

import csv
import json
import random
import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from playwright.sync_api import expect

from devhost.process import HostProcess
from tests.e2e.conftest import Api
from tests.support.thematic_data import feedback


def _survey(seed: int, offset: int) -> list[dict[str, Any]]:
    items, truth = feedback(per_theme=25, seed=seed)
    rng = random.Random(seed)
    rows = []
    for it, t in zip(items, truth, strict=True):
        # App crashes cost 3 points of a 0-10 rating; delivery complaints come mostly from the "pro" plan.
        nps = max(0, min(10, round(rng.gauss(8, 1.5)) - (3 if t == "app" else 0)))
        plan = "pro" if rng.random() < (0.8 if t == "delivery" else 0.2) else "free"
        rows.append({"respondent": f"r{offset + it['id']}", "comment": it["text"], "plan": plan, "nps": nps,
                     "stars": rng.choice([1, 2, 4, 5]), "note": "internal"})
    return rows


def _csv(path: Path, rows: list[dict[str, Any]]) -> Path:
    with path.open("w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


def _open_form_with(page: Any, host: HostProcess, api: Api, f: Path) -> list[dict[str, Any]]:
    """The New analysis form with ``f`` chosen; the bodies the page POSTs to /api/jobs, as they are sent."""
    page.goto(f"{host.url}/api/ui?code={api.key}#/new")
    page.wait_for_selector("#responses-file")
    posted: list[dict[str, Any]] = []
    page.on("request", lambda r: posted.append(json.loads(r.post_data))
            if r.method == "POST" and r.url.split("?")[0].endswith("/api/jobs") else None)
    page.set_input_files("#responses-file", str(f))
    expect(page.locator("#metadata-fields")).to_be_visible()
    return posted


def _jobs(api: Api) -> set[str]:
    status, _, body = api.call("GET", "/api/jobs?limit=200")
    assert status == 200
    return {j["id"] for j in body["items"]}


def test_the_form_sends_metadata_breakdowns_score_sentiment_and_compare_to(page: Any, host: HostProcess, api: Api,
                                                                          tmp_path: Path) -> None:
    wave1 = [{"id": r["respondent"], "text": r["comment"], "metadata": {"plan": r["plan"], "nps": r["nps"]}}
             for r in _survey(1, 0)]
    first = api.wait(api.submit("thematic", {"llm": "off", "num_themes": 4}, wave1)["id"], timeout=240)
    assert first["status"] == "succeeded", first
    f = _csv(tmp_path / "wave2.csv", _survey(2, 1000))

    posted = _open_form_with(page, host, api, f)
    assert page.locator("#text-column").input_value() == "comment"
    page.select_option("#id-column", "respondent")
    # Metadata choices are the columns other than the text and id ones.
    boxes = page.locator("#metadata-columns input[type='checkbox']")
    expect(boxes).to_have_count(4)
    page.check("#metadata-columns input[value='note']")
    page.check("#breakdown-by input[value='plan']")
    page.select_option("#score-column", "nps")
    assert page.locator("#score-scale").input_value() == "nps"  # guessed from the 0-10 integers
    # The sentiment source starts at the server's default (no params.sentiment sent): the classifier.
    assert page.locator("#sentiment-source").input_value() == ""
    expect(page.locator("#sentiment-source option:checked")).to_have_text("the text (the sentiment model, default)")
    page.select_option("#sentiment-source", "from:stars")
    # compare_to: a picker over the tenant's earlier jobs (GET /api/jobs), the first wave among them.
    expect(page.locator(f"#compare-to option[value='{first['id']}']")).to_have_count(1)
    page.select_option("#compare-to", first["id"])
    page.click("#submit-job")
    page.wait_for_url("**#/jobs/*", timeout=60_000)
    body = posted[-1]
    assert body["params"] == {"min_theme_size": 5, "llm": "auto", "breakdown_by": ["plan"],
                              "score": {"key": "nps", "scale": "nps"}, "sentiment_from": "stars",
                              "compare_to": first["id"], "compare_mode": "inherit"}
    rows = _survey(2, 1000)
    # Every column named anywhere is sent as metadata; numbers as numbers (the CSV's "7" is 7), text as text.
    assert body["input"][0] == {"id": rows[0]["respondent"], "text": rows[0]["comment"],
                                "metadata": {"note": "internal", "plan": rows[0]["plan"], "nps": rows[0]["nps"],
                                             "stars": rows[0]["stars"]}}
    job_id = page.url.rsplit("/", 1)[-1]
    job = api.wait(job_id, timeout=240)
    assert job["status"] == "succeeded", job
    _, _, doc = api.call("GET", f"/api/jobs/{job_id}/result")
    assert doc["breakdowns"][0]["field"] == "plan" and doc["sentiment"]["field"] == "stars"
    assert doc["comparison"]["job_id"] == first["id"] and doc["impact"]["key"] == "nps"

    # The job page draws the driver chart: one row per theme in the result's order, the planted one first.
    drivers = page.locator("figure.drivers li.driver")
    expect(drivers).to_have_count(len(doc["impact"]["themes"]), timeout=60_000)
    # The intervals are per theme (no correction for the number of themes, unlike the breakdowns): said so.
    k = len(doc["impact"]["themes"])
    expect(page.locator("figure.drivers figcaption")).to_contain_text(
        f"not corrected for the {k} theme{'' if k == 1 else 's'}:")
    assert [d.get_attribute("data-theme-id") for d in drivers.all()] == [t["theme_id"] for t in doc["impact"]["themes"]]
    top = doc["impact"]["themes"][0]
    assert top["ci_high"] < 0
    expect(drivers.first).to_have_class("driver sure")
    expect(drivers.first.locator(".driver-value")).to_contain_text(f"{top['impact']:+.1f}")
    # Every row is starred exactly when the service's rule stars it (small_n and explained_by: schema 1.5), and the
    # one-theme-per-response note is printed above the chart.
    from pipelines.thematic.impact import starred
    for d, t in zip(drivers.all(), doc["impact"]["themes"], strict=True):
        assert ("sure" in (d.get_attribute("class") or "").split()) == starred(t), t
    if doc["impact"].get("note"):
        expect(page.locator("figure.drivers figcaption")).to_contain_text(doc["impact"]["note"])
    expect(page.locator("table.comparison tbody tr")).to_have_count(len(doc["comparison"]["themes"]))


def test_a_score_column_that_is_not_a_number_is_refused_naming_the_field(page: Any, host: HostProcess, api: Api,
                                                                        tmp_path: Path) -> None:
    f = _csv(tmp_path / "survey.csv", _survey(3, 0))
    before = _jobs(api)
    page.goto(f"{host.url}/api/ui?code={api.key}#/new")
    page.wait_for_selector("#responses-file")
    page.set_input_files("#responses-file", str(f))
    expect(page.locator("#metadata-fields")).to_be_visible()
    page.select_option("#score-column", "plan")
    page.select_option("#score-scale", "numeric")
    page.click("#submit-job")
    alert = page.locator("[role=alert]")
    expect(alert).to_contain_text("params.score.key", timeout=60_000)
    assert "#/new" in page.url and _jobs(api) == before
    # The browser logs the refused request itself ("status of 422"): expected here, unlike any other error.
    page.errors[:] = [e for e in page.errors if "status of 422" not in e]


def test_a_rating_columns_scale_can_be_declared_and_a_scale_the_values_do_not_fit_is_refused(
        page: Any, host: HostProcess, api: Api, tmp_path: Path) -> None:
    f = _csv(tmp_path / "survey.csv", _survey(4, 0))
    before = _jobs(api)
    posted = _open_form_with(page, host, api, f)
    page.select_option("#id-column", "respondent")
    # The scale picker is for a rating column only.
    expect(page.locator("#sentiment-scale")).to_be_disabled()
    page.select_option("#sentiment-source", "from:nps")
    expect(page.locator("#sentiment-scale")).to_be_enabled()
    assert page.locator("#sentiment-scale").input_value() == ""  # guessed by the server unless declared
    # The nps column is 0-10: declared 1-5 it does not fit, a 422 naming the scale, shown; nothing is stored.
    page.select_option("#sentiment-scale", "1-5")
    page.click("#submit-job")
    alert = page.locator("[role=alert]")
    expect(alert).to_contain_text("params.sentiment_from.scale", timeout=60_000)
    assert posted[-1]["params"]["sentiment_from"] == {"key": "nps", "scale": "1-5"}
    assert "#/new" in page.url and _jobs(api) == before
    page.errors[:] = [e for e in page.errors if "status of 422" not in e]
    page.select_option("#sentiment-scale", "0-10")
    page.click("#submit-job")
    page.wait_for_url("**#/jobs/*", timeout=60_000)
    assert posted[-1]["params"]["sentiment_from"] == {"key": "nps", "scale": "0-10"}
    job = api.wait(page.url.rsplit("/", 1)[-1], timeout=240)
    assert job["status"] == "succeeded", job
    _, _, doc = api.call("GET", f"/api/jobs/{job['id']}/result")
    assert (doc["sentiment"]["scale"], doc["sentiment"]["scale_from"]) == ("score10", "declared")
    expect(page.locator("#sentiment-source-note")).to_have_text(
        "sentiment: the rating field “nps” (0–10, as NPS groups, declared)", timeout=60_000)


def test_the_compare_to_picker_asks_for_thematic_jobs_and_pages(page: Any, host: HostProcess, api: Api) -> None:
    # The picker took the 50 newest succeeded jobs of every pipeline and kept the thematic ones: a tenant whose
    # newest 50 are of another pipeline saw no earlier job. It asks for pipeline=thematic now, and pages. The
    # listing is served here (page.route) as the service would filter it, so no other pipeline has to exist.
    def job(n: int, pipeline: str) -> dict[str, Any]:
        return {"id": f"{pipeline[:2]}{n:030d}", "pipeline": pipeline, "status": "succeeded",
                "created_at": f"2026-12-0{1 + n % 6}T10:00:00Z", "attempts": 1, "max_attempts": 3}

    asked: list[dict[str, list[str]]] = []

    def serve(route: Any) -> None:
        q = parse_qs(urlsplit(route.request.url).query)
        asked.append(q)
        if q.get("pipeline") != ["thematic"]:
            body = {"items": [job(n, "other") for n in range(50)], "next_cursor": "more-other"}
        elif "cursor" not in q:
            body = {"items": [job(n, "thematic") for n in range(50)], "next_cursor": "page-2"}
        else:
            body = {"items": [job(n, "thematic") for n in range(50, 53)], "next_cursor": None}
        route.fulfill(status=200, content_type="application/json", body=json.dumps(body))

    page.route(re.compile(r"/api/jobs\?"), serve)
    page.goto(f"{host.url}/api/ui?code={api.key}#/new")
    options = page.locator("#compare-to option")
    expect(options).to_have_count(51)  # "(none)" and the first page
    expect(page.locator("#compare-to-more")).to_be_visible()
    page.click("#compare-to-more")
    expect(options).to_have_count(54)
    expect(page.locator("#compare-to-more")).to_be_hidden()
    assert [q.get("pipeline") for q in asked] == [["thematic"], ["thematic"]]
    assert asked[0]["status"] == ["succeeded"] and asked[1]["cursor"] == ["page-2"]


def test_a_0_to_5_rating_is_declared_for_the_score_and_the_sentiment_on_one_scale(
        page: Any, host: HostProcess, api: Api, tmp_path: Path) -> None:
    # researcher46 (schema 1.7): a 0-5 rating had no scale to declare (an inferred 0-5 field is a 422, and a score
    # was nps / csat / numeric). Each answer's 0-5 satisfaction; app crashes cost 2 points.
    rng = random.Random(5)
    rows = [{**r, "sat": max(0, min(5, rng.choice([3, 4, 4, 5]) - (2 if "crash" in r["comment"].lower() else 0)))}
            for r in _survey(5, 0)]
    rows[0]["sat"] = 0
    f = _csv(tmp_path / "survey.csv", rows)
    before = _jobs(api)
    posted = _open_form_with(page, host, api, f)
    page.select_option("#id-column", "respondent")
    page.select_option("#score-column", "sat")
    assert page.locator("#score-scale").input_value() == "0-5"  # guessed: integers 0-5 with a 0
    # A 1-5 declared on it does not fit its 0s: a 422 naming params.score.scale, shown; nothing is stored.
    page.select_option("#score-scale", "1-5")
    page.click("#submit-job")
    expect(page.locator("[role=alert]")).to_contain_text("params.score.scale", timeout=60_000)
    assert posted[-1]["params"]["score"] == {"key": "sat", "scale": "1-5"}
    assert "#/new" in page.url and _jobs(api) == before
    page.errors[:] = [e for e in page.errors if "status of 422" not in e]
    page.select_option("#score-scale", "0-5")
    page.select_option("#sentiment-source", "from:sat")
    page.select_option("#sentiment-scale", "0-5")
    page.click("#submit-job")
    page.wait_for_url("**#/jobs/*", timeout=60_000)
    params = posted[-1]["params"]
    assert (params["score"], params["sentiment_from"]) == ({"key": "sat", "scale": "0-5"}, {"key": "sat", "scale": "0-5"})
    job = api.wait(page.url.rsplit("/", 1)[-1], timeout=240)
    assert job["status"] == "succeeded", job
    _, _, doc = api.call("GET", f"/api/jobs/{job['id']}/result")
    assert doc["schema_version"] == "1.7"
    assert (doc["sentiment"]["scale"], doc["sentiment"]["rating_range"], doc["sentiment"]["scale_from"]) == (
        "rating0to5", "0-5", "declared")
    # Label and score on one scale, per answer: 0-1 negative, 2-3 neutral (score 0), 4-5 positive, (r - 2.5) / 2.5.
    sat = {r["respondent"]: r["sat"] for r in rows}
    for a in doc["assignments"]:
        if a.get("sentiment") is None:
            continue
        r = sat[str(a["response_id"])]
        want = ("negative", (r - 2.5) / 2.5) if r <= 1 else ("neutral", 0.0) if r < 4 else ("positive", (r - 2.5) / 2.5)
        assert (a["sentiment"]["label"], round(a["sentiment"]["score"], 4)) == (want[0], round(want[1], 4)), a
    assert doc["impact"]["scale"] == "0-5"
    overall = sum(sat[str(a["response_id"])] for a in doc["assignments"] if a["bucket"] != "unusable") / sum(
        1 for a in doc["assignments"] if a["bucket"] != "unusable")
    assert abs(doc["impact"]["overall"] - overall) < 1e-4
    expect(page.locator("#sentiment-source-note")).to_have_text(
        "sentiment: the rating field “sat” (0–5, declared)", timeout=60_000)
    expect(page.locator("figure.drivers figcaption")).to_contain_text(
        f"overall mean rating (0–5) {doc['impact']['overall']:.2f} over {doc['impact']['n']} scored responses")
