"""Issue 15 in the dashboard (headless Chromium): the segment × theme heat map with significant cells marked,
sentiment bars per theme, the change since a compared job, and rename/merge in place under If-Match."""

from __future__ import annotations

import json
import random
import re
from typing import Any

from playwright.sync_api import expect

from devhost.process import HostProcess
from tests.e2e.conftest import Api
from tests.e2e.ui.test_dashboard import open_ui
from tests.support.thematic_data import feedback

#: A segment value that would run script if the page ever rendered metadata as HTML.
HOSTILE = "<img src=x onerror=\"window.__owned=1\">pro"


def _items(per_theme: int, seed: int, offset: int, delivery_boost: int = 1) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    items, truth = feedback(per_theme=per_theme * delivery_boost, seed=seed)
    out, taken = [], {}
    for it, t in zip(items, truth, strict=True):
        want = per_theme * (delivery_boost if t == "delivery" else 1)
        if taken.get(t, 0) >= want:
            continue
        taken[t] = taken.get(t, 0) + 1
        pro = rng.random() < (0.8 if t == "delivery" else 0.1)
        out.append({"id": offset + len(out), "text": it["text"], "metadata": {"plan": HOSTILE if pro else "free"}})
    return out


def test_heat_map_sentiment_change_and_rename_merge_in_place(page: Any, host: HostProcess, api: Api) -> None:
    params = {"llm": "off", "num_themes": 4, "breakdown_by": ["plan"], "min_group_size": 10}
    first = api.wait(api.submit("thematic", params, _items(25, 1, 0))["id"], timeout=240)
    assert first["status"] == "succeeded", first
    later = _items(25, 2, 1000, delivery_boost=3)
    # Three people gave the first answer word for word: three more respondents (schema 1.4, count_duplicates).
    later += [{**later[0], "id": 5000 + n} for n in range(3)]
    second = api.wait(api.submit("thematic", {**params, "compare_to": first["id"]}, later)["id"], timeout=240)
    assert second["status"] == "succeeded", second
    _, _, doc = api.call("GET", f"/api/jobs/{second['id']}/result")

    open_ui(page, host, api, f"#/jobs/{second['id']}")
    heat = page.locator("table.heatmap[data-field='plan']")
    expect(heat).to_be_visible(timeout=30000)
    assert doc["run"]["counts"]["duplicates"] == 3
    expect(page.locator(".copies-note")).to_have_text("(3 of them copies of an earlier answer)")
    # One row per theme, one column per group; the significant cells are exactly the result's, marked "*".
    groups = doc["breakdowns"][0]["groups"]
    expect(heat.locator("tbody tr")).to_have_count(len(doc["themes"]))
    expect(heat.locator("thead th")).to_have_count(1 + len(groups))
    # Metadata is shown as text: the hostile value is visible verbatim and nothing ran.
    expect(heat.locator("thead th", has_text=HOSTILE)).to_have_count(1)
    assert page.evaluate("window.__owned") is None and heat.locator("img").count() == 0
    significant = sum(1 for g in groups for c in g["themes"] if c["significant"])
    assert significant > 0
    expect(heat.locator("td.sig")).to_have_count(significant)
    for cell in heat.locator("td.sig").all():
        assert cell.inner_text().endswith("*")
    # Cells tested by Fisher's exact test (schema 1.4: an expected count below 5) are exactly the result's, marked †.
    exact = sum(1 for g in groups for c in g["themes"] if c["test"] == "fisher")
    expect(heat.locator("td[data-test='fisher']")).to_have_count(exact)
    # A small n group is not tested (the legend says so): its cells keep the result's test but carry no † (review46).
    small = {str(g["value"]) for g in groups if g.get("small_n")}
    for cell in heat.locator("td[data-test='fisher']").all():
        assert ("†" in cell.inner_text()) == (cell.get_attribute("data-group") not in small)
    # Sentiment bars per theme, labelled with their counts.
    first_theme = doc["themes"][0]
    bar = page.locator(f"li.theme[data-theme-id='{first_theme['id']}'] .sentiment")
    s = first_theme["sentiment"]
    expect(bar).to_have_attribute("aria-label", f"Sentiment: {s['positive']} positive, {s['neutral']} neutral, "
                                  f"{s['negative']} negative, mean {s['mean']:.2f}")
    # The change since the compared job: a row per compared theme, the significant ones marked.
    cmp_rows = page.locator("table.comparison tbody tr")
    cmp = doc["comparison"]
    expect(page.locator("table.comparison caption")).to_contain_text(
        f"{cmp['n_then']} usable responses then, {cmp['n_now']} now")
    expect(cmp_rows).to_have_count(len(doc["comparison"]["themes"]))
    up = [r for r in doc["comparison"]["themes"] if r["significant"]]
    expect(page.locator("table.comparison tr[data-significant='true']")).to_have_count(len(up))
    # The answers far from every earlier theme, in the report's sentence (comparison.far was shown nowhere).
    expect(page.locator("p.far-note")).to_contain_text(
        f"{cmp['far']} of the {cmp['n_now']} answers now ({100 * cmp['far'] / cmp['n_now']:.1f}%) are far")

    # Rename in place: the page sends PATCH with the result's ETag and shows the new name everywhere.
    tid = first_theme["id"]
    entry = page.locator(f"ul.codebook li[data-theme-id='{tid}']")
    entry.locator("input[type='text']").fill("Renamed in the browser")
    entry.locator("button.rename").click()
    expect(page.locator(f"li.theme[data-theme-id='{tid}'] .theme-label")).to_have_text("Renamed in the browser",
                                                                                       timeout=30000)
    expect(heat.locator(f"tr[data-theme-id='{tid}'] th")).to_have_text("Renamed in the browser")
    # Merge two themes in place: the absorbed one disappears, counts follow.
    a, b = doc["themes"][0]["id"], doc["themes"][1]["id"]
    page.locator(f"ul.codebook li[data-theme-id='{a}'] input[type='checkbox']").check()
    page.locator(f"ul.codebook li[data-theme-id='{b}'] input[type='checkbox']").check()
    page.locator("button.merge").click()
    expect(page.locator(f"li.theme[data-theme-id='{b}']")).to_have_count(0, timeout=30000)
    _, _, after = api.call("GET", f"/api/jobs/{second['id']}/result")
    merged = next(t for t in after["themes"] if t["id"] == a)
    assert merged["count"] == doc["themes"][0]["count"] + doc["themes"][1]["count"]
    assert [e["op"] for e in after["edits"]] == ["rename", "merge"]
    expect(page.locator(f"li.theme[data-theme-id='{a}'] .theme-count b")).to_have_text(str(merged["count"]))
    expect(page.locator("ul.edit-log li")).to_have_count(2)


def test_a_zero_to_ten_rating_shows_each_themes_nps_and_its_scale_in_words(page: Any, host: HostProcess,
                                                                            api: Api) -> None:
    # sentiment_from a 0-10 rating: the bar said "mean -0.95" (NPS / 100) and the source "(score10)", the code's name.
    items, truth = feedback(per_theme=10, seed=3)
    rng = random.Random(3)
    for it, t in zip(items, truth, strict=True):
        it["metadata"] = {"ltr": rng.choice([0, 3, 6, 7, 9, 10] if t == "delivery" else [8, 9, 10])}
    job = api.wait(api.submit("thematic", {"llm": "off", "num_themes": 3, "sentiment_from": "ltr"}, items)["id"],
                   timeout=240)
    assert job["status"] == "succeeded", job
    _, _, doc = api.call("GET", f"/api/jobs/{job['id']}/result")
    open_ui(page, host, api, f"#/jobs/{job['id']}")
    expect(page.locator("#sentiment-source-note")).to_have_text(
        "sentiment: the rating field “ltr” (0–10, as NPS groups, inferred from the values)", timeout=30000)
    for t in doc["themes"]:
        s = t["sentiment"]
        expect(page.locator(f"li.theme[data-theme-id='{t['id']}'] .sentiment")).to_have_attribute(
            "aria-label", f"Sentiment: {s['positive']} positive, {s['neutral']} neutral, {s['negative']} negative, "
                          f"NPS {s['nps']:.1f}")


def test_shares_are_rounded_once_from_their_counts_as_the_report_rounds_them(page: Any, host: HostProcess,
                                                                             api: Api) -> None:
    # The result stores shares to 4 decimals: 5 of 401 (1.247 %) is 0.0125, which the page rounded again to
    # "1.3%" where the Markdown report and the CLI say 1.2 %. The document is served as a real job's result with
    # those counts (page.route), so the edge case does not depend on how the clustering falls.
    items, _ = feedback(per_theme=10, seed=4)
    for it in items:
        it["metadata"] = {"plan": "pro"}
    job = api.wait(api.submit("thematic", {"llm": "off", "num_themes": 2, "breakdown_by": ["plan"],
                                           "min_group_size": 1}, items)["id"], timeout=240)
    assert job["status"] == "succeeded", job
    _, _, doc = api.call("GET", f"/api/jobs/{job['id']}/result")
    t = doc["themes"][0]
    t["count"], t["share"] = 5, 0.0125
    doc["run"]["counts"]["usable"] = 401
    group = doc["breakdowns"][0]["groups"][0]
    group["n"] = 401
    cell = next(c for c in group["themes"] if c["theme_id"] == t["id"])
    cell["count"], cell["share"] = 5, 0.0125

    def serve(route: Any) -> None:
        route.fulfill(status=200, content_type="application/json", body=json.dumps(doc))

    page.route(f"**/api/jobs/{job['id']}/result*", serve)
    open_ui(page, host, api, f"#/jobs/{job['id']}")
    expect(page.locator(f"li.theme[data-theme-id='{t['id']}'] .theme-count")).to_have_text("5 · 1.2%", timeout=30000)
    expect(page.locator(f"table.heatmap tr[data-theme-id='{t['id']}'] td").first).to_contain_text("1.2%")
    # The one group's rest is empty, so it is small_n (schema 1.5): marked in its header and its cells' tooltips.
    assert group["small_n"] is True
    expect(page.locator("table.heatmap thead th", has_text="small n")).to_have_count(1)
    assert "not tested (small n" in (page.locator("table.heatmap tbody td").first.get_attribute("title") or "")


def test_a_real_missing_answer_and_the_responses_without_a_value_are_two_columns(page: Any, host: HostProcess,
                                                                              api: Api) -> None:
    # A survey whose answers include the literal "(missing)": it merged with the synthetic group of responses
    # without a value (issue 23). Two columns now, the real one quoted; the segment hints offer the real value only.
    items, _ = feedback(per_theme=12, seed=6)
    for n, it in enumerate(items):
        it["metadata"] = {"plan": "(missing)"} if n % 3 == 0 else {"plan": "pro"} if n % 3 == 1 else {}
    job = api.wait(api.submit("thematic", {"llm": "off", "num_themes": 2, "breakdown_by": ["plan"],
                                           "min_group_size": 1}, items)["id"], timeout=240)
    assert job["status"] == "succeeded", job
    _, _, doc = api.call("GET", f"/api/jobs/{job['id']}/result")
    assert {(g["value"], g["synthetic"]) for g in doc["breakdowns"][0]["groups"]} == {
        ("pro", None), ("(missing)", None), ("(missing)", "missing")}
    open_ui(page, host, api, f"#/jobs/{job['id']}")
    heat = page.locator("table.heatmap[data-field='plan']")
    expect(heat).to_be_visible(timeout=30000)
    expect(heat.locator("thead th[data-synthetic='missing']")).to_have_text(re.compile(r"^\(missing\) \(n="))
    expect(heat.locator("thead th[data-synthetic='']", has_text='"(missing)"')).to_have_count(1)
    page.locator("li.theme .theme-head").first.click()  # a theme's response list, with its segment filter
    expect(page.locator("datalist option").first).to_be_attached(timeout=30000)
    hints = [o.get_attribute("value") for o in page.locator("datalist").first.locator("option").all()]
    assert "plan=(missing)" in hints and "plan=pro" in hints
