"""The heat map links every breakdown group to its responses, the synthetic ones too (researcher46): "(missing)"
(the responses without a value, ``missing=KEY``) and "other values" (the pooled small groups, ``other_values=KEY``),
as a submitted value is (``metadata[KEY]=VALUE``); the theme view's Group picker offers them all. Before, the
dashboard offered only the submitted values (as segment hints), so a synthetic group's responses could be listed
through the API and the CLI only. Every list is checked against the API, headless Chromium, local host."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from playwright.sync_api import expect

from devhost.process import HostProcess
from tests.e2e.conftest import Api
from tests.e2e.ui.test_dashboard import open_ui
from tests.support.thematic_data import feedback

#: A value that would run script if the page rendered a group's label as HTML.
HOSTILE = "<img src=x onerror=\"window.__owned=1\">"


def _ids(api: Api, job_id: str, query: dict[str, str]) -> list[str]:
    status, _, body = api.call("GET", f"/api/jobs/{job_id}/responses?{urlencode({**query, 'limit': '500'})}")
    assert status == 200, body
    assert body["next_cursor"] is None
    return [str(r["id"]) for r in body["items"]]


def test_every_group_of_the_heat_map_links_to_its_responses_synthetic_ones_too(page: Any, host: HostProcess,
                                                                              api: Api) -> None:
    items, _ = feedback(per_theme=16, seed=8)
    # pro / free, a literal "(missing)" answer, no value at all, and eight rare plans pooled as "other values".
    rare = ["gold", "team", HOSTILE, "edu", "trial", "legacy", "partner", "ngo"]
    for n, it in enumerate(items):
        k = n % 8
        it["metadata"] = ({"plan": "pro"} if k in (0, 1) else {"plan": "free"} if k in (2, 3) else
                          {"plan": "(missing)"} if k == 4 else {} if k == 5 else {"plan": rare[(n // 8 + k) % len(rare)]})
    job = api.wait(api.submit("thematic", {"llm": "off", "num_themes": 3, "breakdown_by": ["plan"],
                                           "min_group_size": 5}, items)["id"], timeout=240)
    assert job["status"] == "succeeded", job
    _, _, doc = api.call("GET", f"/api/jobs/{job['id']}/result")
    groups = doc["breakdowns"][0]["groups"]
    assert {g["synthetic"] for g in groups} == {None, "missing", "other"}, groups

    open_ui(page, host, api, f"#/jobs/{job['id']}")
    heat = page.locator("table.heatmap[data-field='plan']")
    expect(heat).to_be_visible(timeout=30000)
    panel = page.locator(".group-responses[data-field='plan']")
    links = heat.locator("thead th button.group-link")
    expect(links).to_have_count(len(groups))  # every group of a categorical breakdown: a link
    for g, query in [(next(g for g in groups if g["synthetic"] == "missing"), {"missing": "plan"}),
                     (next(g for g in groups if g["synthetic"] == "other"), {"other_values": "plan"}),
                     (next(g for g in groups if g["value"] == "(missing)" and g["synthetic"] is None),
                      {"metadata[plan]": "(missing)"}),
                     (next(g for g in groups if g["value"] == "pro"), {"metadata[plan]": "pro"})]:
        want = _ids(api, job["id"], query)
        assert want
        synthetic = g["synthetic"] or ""
        heading = {"missing": "(missing)", "other": "other values"}.get(synthetic) or (
            '"(missing)"' if g["value"] == "(missing)" else g["value"])
        name = f"{heading} (n={g['n']}{', small n' if g.get('small_n') else ''})"
        link = heat.locator(f"thead th[data-synthetic='{synthetic}']").get_by_role("button", name=name, exact=True)
        expect(link).to_have_count(1)
        link.click()
        expect(link).to_have_attribute("aria-expanded", "true")
        rows = panel.locator(".responses li")
        expect(rows).to_have_count(len(want), timeout=30000)
        assert rows.evaluate_all("els => els.map(e => e.dataset.responseId)") == want, (query, g)
        # The list says how many the breakdown counts (its n: the usable ones).
        expect(panel.locator("h3")).to_contain_text(f"({len(want)}")
    # The same link again closes the list.
    link.click()
    expect(panel.locator(".responses")).to_have_count(0)
    # The "other values" group pooled a hostile plan: shown as text, nothing ran.
    assert page.evaluate("window.__owned") is None and heat.locator("img").count() == 0

    # A theme's filter offers every group too, the synthetic ones by name: theme AND the responses without a plan.
    t = doc["themes"][0]
    row = page.locator(f"li.theme[data-theme-id='{t['id']}']")
    row.locator("button.theme-head").click()
    picker = row.get_by_label("Group", exact=True)
    expect(picker.locator("option[data-synthetic='missing']")).to_have_text("plan: (missing)")
    expect(picker.locator("option[data-synthetic='other']")).to_have_text("plan: other values")
    expect(picker.locator("option", has_text='plan: "(missing)"')).to_have_count(1)
    want = _ids(api, job["id"], {"theme": t["id"], "missing": "plan"})
    picker.select_option(label="plan: (missing)")
    row.get_by_role("button", name="Filter").click()
    items_shown = row.locator(".responses li")
    expect(row.locator("h3", has_text="Every response in this theme")).to_contain_text(f"({len(want)}")
    expect(items_shown).to_have_count(len(want))
    assert items_shown.evaluate_all("els => els.map(e => e.dataset.responseId)") == want
