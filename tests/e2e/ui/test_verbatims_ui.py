"""Issue 23: every response list of the dashboard shows texts for every job, wherever it was submitted.

The job is submitted through the CLI (so no browser tab ever held its input), then opened in a fresh browser
context: every response of the largest theme must show its text, page after page, and the theme view's
segment and sentiment filters must show exactly what the API says.
"""

from __future__ import annotations

import csv
import io
import random
import re
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from devhost.process import HostProcess
from tests.e2e.conftest import Api
from tests.e2e.ui.test_dashboard import open_ui
from tests.support.thematic_data import feedback
from thematiq_cli.main import Io, run


def _survey(tmp_path: Path) -> tuple[Path, dict[str, dict[str, Any]]]:
    """A CSV of 240 answers in four topics, with plan and region columns (metadata)."""
    items, _ = feedback(per_theme=60, seed=3)
    rng = random.Random(3)
    rows: dict[str, dict[str, Any]] = {}
    for it in items:
        rows[str(it["id"] + 1000)] = {"text": it["text"], "plan": rng.choice(["free", "pro"]),
                                      "region": rng.choice(["EU", "US"])}
    path = tmp_path / "survey.csv"
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["id", "text", "plan", "region"])
    for rid, r in rows.items():
        w.writerow([rid, r["text"], r["plan"], r["region"]])
    path.write_text(buf.getvalue(), encoding="utf-8")
    return path, rows


def _all_rows(api: Api, job_id: str, query: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    cursor = ""
    while True:
        status, _, page = api.call("GET", f"/api/jobs/{job_id}/responses?{query}&limit=500{cursor}")
        assert status == 200, page
        rows += page["items"]
        if not page["next_cursor"]:
            return rows
        cursor = f"&cursor={page['next_cursor']}"


def test_cli_job_in_a_fresh_context_shows_every_text_of_the_largest_theme(
    page: Any, host: HostProcess, api: Api, tmp_path: Path,
) -> None:
    path, rows = _survey(tmp_path)
    out, err = io.StringIO(), io.StringIO()
    code = run(["submit", str(path), "--url", host.url, "--key", api.key, "--param", "llm=off",
                "--param", "min_theme_size=5", "--param", "max_themes=2", "--param", 'breakdown_by=["plan"]', "--wait", "--quiet"],
               Io(out, err))
    assert code == 0, err.getvalue()
    job_id = out.getvalue().split()[0]
    assert re.fullmatch(r"[0-9a-f]{28}", job_id)
    status, _, doc = api.call("GET", f"/api/jobs/{job_id}/result")
    assert status == 200
    largest = max(doc["themes"], key=lambda t: t["count"])
    members = [str(a["response_id"]) for a in doc["assignments"]
               if any(r["theme_id"] == largest["id"] for r in a["themes"])]
    assert len(members) > 100, "the largest theme must span more than one page of the list"

    open_ui(page, host, api, f"#/jobs/{job_id}")
    assert page.evaluate("Object.keys(sessionStorage).filter(k => k.startsWith('thematiq.input.'))") == []
    page.wait_for_selector("#themes li.theme")
    row = page.locator(f"li.theme[data-theme-id='{largest['id']}']")
    row.locator("button.theme-head").click()
    items = row.locator(".responses li")
    more = row.get_by_role("button", name=re.compile("^Load more"))
    expect(items.first).to_be_visible()
    while more.is_visible():
        shown = items.count()
        more.click()
        expect(items).not_to_have_count(shown)
    expect(items).to_have_count(len(members))
    assert row.locator("h3", has_text="Every response in this theme").inner_text().endswith(f"({len(members)})")
    ids = items.evaluate_all("els => els.map(e => e.dataset.responseId)")
    texts = row.locator(".responses li .response-text").all_inner_texts()
    assert ids == members
    assert texts == [rows[i]["text"] for i in ids], "every response shows its text as submitted"
    assert "not in the result" not in row.inner_text()

    # The theme view's filters: a segment (metadata key=value) and a sentiment, checked against the API.
    want = _all_rows(api, job_id, f"theme={largest['id']}&metadata[plan]=pro&sentiment=negative")
    assert want, "no negative pro response in the largest theme: pick another filter"
    row.get_by_label("Segment", exact=True).fill("plan=pro")
    row.get_by_label("Sentiment", exact=True).select_option("negative")
    row.get_by_role("button", name="Filter").click()
    expect(row.locator("h3", has_text="Every response in this theme")).to_have_text(
        f"Every response in this theme ({len(want)})")
    expect(items).to_have_count(len(want))
    assert items.evaluate_all("els => els.map(e => e.dataset.responseId)") == [str(r["id"]) for r in want]
    assert all(rows[str(r["id"])]["plan"] == "pro" for r in want)

    # A key no response has is refused with the field named, and the list says so.
    row.get_by_label("Segment", exact=True).fill("colour=red")
    row.get_by_role("button", name="Filter").click()
    expect(row.locator(".alert")).to_contain_text("metadata[colour]")
    page.errors.clear()  # the 422 is logged by the browser as a failed request: expected here

    # Other responses come from the same route.
    other = [str(a["response_id"]) for a in doc["assignments"] if a["bucket"] == "other"]
    if other:
        orow = page.locator("li.theme[data-theme-id='other']")
        orow.locator("button.theme-head").click()
        expect(orow.locator(".responses li")).to_have_count(len(other))
        assert orow.locator(".responses li .response-text").all_inner_texts() == [rows[i]["text"] for i in other]
