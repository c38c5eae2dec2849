"""``GET /api/jobs/{id}/responses`` and the CSV/xlsx exports, calling the functions directly against Azurite.

The job is submitted through the real route (so its input is stored by the real code, inline or claim-checked)
and its result is planted as the worker would store it: these tests are about the join, the paging, the
filters, tenancy, the ETag and the storage operations a page costs, not about clustering (tests/e2e runs the
real pipeline through the host).
"""

from __future__ import annotations

import io
import json
import uuid
from typing import Any

import pytest

from shared.config.constants import TENANT_HEADER
from shared.core.jobs import Status, utcnow
from shared.observability.metering import METER, TransactionMeter
from shared.storage.blobs import BlobStore
from shared.storage.job_store import JobStore
from tests.support.direct import body_of, http
from tests.support.platform import fast_settings, submit
from tests.support.synthetic_result import synthetic_job


@pytest.fixture(autouse=True)
def _env(storage_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    fast_settings(monkeypatch, MAX_INPUT_BYTES="20000000")


def plant(n: int, *, tenant: str = "local", inline_result: bool | None = None, tricky: bool = False,
          impact: bool = True, parents: bool = False) -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
    """A thematic job of ``n`` synthetic responses, submitted for real, with its result stored as the worker
    stores one (in the row when small, else a blob the row names). ``parents``: the eight themes under two broad
    themes (p1 = t1-t4, p2 = t5-t8), each response's ``broad`` its primary theme's, counted as a run before
    2026-12-07 counted them (the primary theme's parent only)."""
    items, doc = synthetic_job(n, seed=n, tricky=tricky, impact=impact)
    if parents:
        _with_parents(doc)
    j = submit("thematic", {"llm": "off"}, items, headers={TENANT_HEADER: tenant})
    store = JobStore()
    row = store.get(tenant, j["id"])
    body = json.dumps(doc, separators=(",", ":")).encode()
    name = f"{tenant}/{j['id']}/result-{uuid.uuid4().hex[:8]}.json"
    small = len(body) <= 30_000 if inline_result is None else inline_result
    if not small:
        BlobStore().put(name, body, "application/json")
    store.update(row, status=Status.SUCCEEDED, finished_at=utcnow(), result_blob=name, result_bytes=len(body),
                 result_inline=body if small else None)
    return j["id"], items, doc


def _with_parents(doc: dict[str, Any]) -> None:
    parent = {f"t{k}": "p1" if k <= 4 else "p2" for k in range(1, 9)}
    doc["parents"] = [{"id": p, "label": f"Broad {p}", "description": "", "keywords": [], "key_phrases": [],
                       "count": 0, "share": 0.0, "quotes": [], "children": [t for t, q in parent.items() if q == p]}
                      for p in ("p1", "p2")]
    doc["subthemes"] = []
    doc["levels"] = {"broad": "parents", "fine": "themes", "broad_count": 2, "fine_count": 8}
    for t in doc["themes"]:
        t["parent"], t["subthemes"] = parent[t["id"]], []
    for a in doc["assignments"]:
        if a["themes"]:
            a["broad"] = parent[a["themes"][0]["theme_id"]]
            a["fine"] = a["themes"][0]["theme_id"]
            doc["parents"][0 if a["broad"] == "p1" else 1]["count"] += 1


def get(job_id: str, params: dict[str, str] | None = None, headers: dict[str, str] | None = None) -> Any:
    return http("list_job_responses", "GET", f"jobs/{job_id}/responses", params=params or {},
                headers=headers or {}, route_params={"id": job_id})


def problem(resp: Any, status: int, field: str) -> dict[str, Any]:
    assert resp.status_code == status, resp.get_body()
    assert resp.mimetype == "application/problem+json"
    body = json.loads(resp.get_body())
    assert field in [e["field"] for e in body.get("errors", [])], body
    return body


def every_row(job_id: str, params: dict[str, str] | None = None, limit: int = 7) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    cursor = None
    while True:
        q = {**(params or {}), "limit": str(limit), **({"cursor": cursor} if cursor else {})}
        resp = get(job_id, q)
        assert resp.status_code == 200, resp.get_body()
        page = body_of(resp)
        assert len(page["items"]) <= limit
        rows.extend(page["items"])
        cursor = page["next_cursor"]
        if not cursor:
            assert page["total"] == len(rows)
            return rows


def test_pages_join_every_text_and_metadata_in_submitted_order() -> None:
    job_id, items, doc = plant(60)
    rows = every_row(job_id)
    assert [r["id"] for r in rows] == [it["id"] for it in items]
    assert [r["text"] for r in rows] == [it["text"] for it in items]
    assert [r["metadata"] for r in rows] == [it["metadata"] for it in items]
    by_id = {a["response_id"]: a for a in doc["assignments"]}
    labels = {t["id"]: t["label"] for t in doc["themes"]} | {s["id"]: s["label"] for s in doc["subthemes"]}
    for r in rows:
        a = by_id[r["id"]]
        assert r["bucket"] == a["bucket"]
        assert [(t["theme_id"], t["confidence"]) for t in r["themes"]] == [
            (t["theme_id"], t["confidence"]) for t in a["themes"]]
        assert all(t["label"] == labels[t["theme_id"]] for t in r["themes"])
        assert (r["broad"] or {}).get("id") == a.get("broad") and (r["fine"] or {}).get("id") == a.get("fine")
        assert r["fine"] is None or r["fine"]["label"] == labels[a["fine"]]
        assert r["sentiment"] == a.get("sentiment")


@pytest.mark.parametrize("params", [
    {"theme": "t2"}, {"subtheme": "t3.1"}, {"bucket": "other"}, {"bucket": "unusable"}, {"sentiment": "negative"},
    {"metadata[plan]": "pro"}, {"metadata[nps]": "7"}, {"theme": "t1", "metadata[region]": "EU", "sentiment": "positive"},
])
def test_each_filter_keeps_exactly_the_matching_responses(params: dict[str, str]) -> None:
    job_id, items, doc = plant(240)
    by_id = {a["response_id"]: a for a in doc["assignments"]}

    def keep(it: dict[str, Any]) -> bool:
        a = by_id[it["id"]]
        ok = True
        if "theme" in params:
            ok &= params["theme"] in {t["theme_id"] for t in a["themes"]}
        if "subtheme" in params:
            ok &= a.get("fine") == params["subtheme"]
        if "bucket" in params:
            ok &= a["bucket"] == params["bucket"]
        if "sentiment" in params:
            ok &= (a.get("sentiment") or {}).get("label") == params["sentiment"]
        for key in ("plan", "region", "nps"):
            if f"metadata[{key}]" in params:
                ok &= str(it["metadata"][key]) == params[f"metadata[{key}]"]
        return bool(ok)

    want = [it["id"] for it in items if keep(it)]
    assert want, "the synthetic job has no response for this filter: the test would prove nothing"
    assert [r["id"] for r in every_row(job_id, params, limit=5)] == want


@pytest.mark.parametrize(("params", "status", "field"), [
    ({"theme": "t99"}, 422, "theme"),
    ({"subtheme": "t1.9"}, 422, "subtheme"),
    ({"bucket": "maybe"}, 422, "bucket"),
    ({"sentiment": "angry"}, 422, "sentiment"),
    ({"metadata[colour]": "red"}, 422, "metadata[colour]"),
    ({"colour": "red"}, 422, "colour"),
    ({"theme": ""}, 422, "theme"),
    ({"limit": "0"}, 422, "limit"),
    ({"limit": "501"}, 422, "limit"),
    ({"limit": "²"}, 422, "limit"),
    ({"cursor": "not-a-cursor"}, 400, "cursor"),
    ({"cursor": "eyJzIjotMSwiZiI6IngifQ"}, 400, "cursor"),  # {"s":-1,"f":"x"}
])
def test_a_bad_filter_limit_or_cursor_is_a_problem_naming_it(params: dict[str, str], status: int, field: str) -> None:
    job_id, _, _ = plant(20)
    problem(get(job_id, params), status, field)


def test_a_cursor_is_bound_to_its_filters() -> None:
    job_id, _, _ = plant(40)
    first = body_of(get(job_id, {"theme": "t1", "limit": "2"}))
    assert first["next_cursor"]
    body = problem(get(job_id, {"theme": "t2", "limit": "2", "cursor": first["next_cursor"]}), 400, "cursor")
    assert "other filters" in body["detail"]


def test_another_tenants_job_is_404_and_an_unfinished_or_echo_job_409() -> None:
    job_id, _, _ = plant(10, tenant="tenant-a")
    assert get(job_id, headers={TENANT_HEADER: "tenant-a"}).status_code == 200
    problem_body = json.loads(get(job_id, headers={TENANT_HEADER: "tenant-b"}).get_body())
    assert get(job_id, headers={TENANT_HEADER: "tenant-b"}).status_code == 404 and problem_body["status"] == 404
    assert get("0" * 28).status_code == 404 and get("../x").status_code == 404
    queued = submit("thematic", {}, [{"id": 1, "text": "hello there"}])
    problem(get(queued["id"]), 409, "status")
    echo = submit("echo", {}, {"a": 1})
    problem(get(echo["id"]), 409, "pipeline")


def test_etag_gives_304_until_the_result_changes() -> None:
    job_id, _, doc = plant(30, impact=False)  # an edit checks the result against the schema of this branch
    first = get(job_id, {"theme": "t1"})
    etag = first.headers["ETag"]
    assert first.status_code == 200 and etag.startswith('W/"')
    again = get(job_id, {"theme": "t1"}, headers={"If-None-Match": etag})
    assert again.status_code == 304 and not again.get_body() and again.headers["ETag"] == etag
    assert get(job_id, {"theme": "t2"}, headers={"If-None-Match": etag}).status_code == 200
    # A codebook edit makes a new result version: the same page is no longer the one the client holds.
    result = http("get_job_result", "GET", f"jobs/{job_id}/result", route_params={"id": job_id})
    edit = http("edit_job_themes", "PATCH", f"jobs/{job_id}/themes", route_params={"id": job_id},
                headers={"If-Match": result.headers["ETag"]},
                body={"edits": [{"op": "rename", "theme": "t1", "label": "Renamed theme"}]})
    assert edit.status_code == 200, edit.get_body()
    fresh = get(job_id, {"theme": "t1"}, headers={"If-None-Match": etag})
    assert fresh.status_code == 200 and fresh.headers["ETag"] != etag
    assert {t["label"] for r in body_of(fresh)["items"] for t in r["themes"] if t["theme_id"] == "t1"} == {
        "Renamed theme"}
    assert doc["themes"][0]["label"] != "Renamed theme"


def _ops_of_a_page(job_id: str, cursor: str | None = None) -> tuple[TransactionMeter, Any]:
    METER.reset()
    resp = get(job_id, {"limit": "50", **({"cursor": cursor} if cursor else {})})
    assert resp.status_code == 200
    return METER, resp


def test_a_page_costs_at_most_three_reads_whatever_the_job_size_or_position(monkeypatch: pytest.MonkeyPatch) -> None:
    from shared.api import service

    monkeypatch.setattr(service, "_PARSED", service._ParsedCache(24 * 1024 * 1024))
    small_id, _, _ = plant(20, inline_result=True)
    big_id, items, _ = plant(3000, inline_result=False)
    job = JobStore().get("local", big_id, with_input=True)
    assert job.input_blob and job.input_inline is None, "the big job's input should be claim-checked"
    get(small_id)  # clients and containers exist from here on
    _, resp = _ops_of_a_page(small_id)
    small = METER.snapshot()
    assert small == {"table:get": 1}, small  # input and result inline in the row
    # The first page of the big job reads the row and both blobs; later pages (and other filters) of the same
    # result version only the row: the parsed result and input are kept per version.
    _, resp = _ops_of_a_page(big_id)
    assert METER.snapshot() == {"table:get": 1, "blob:get": 2}, METER.snapshot()
    cursor = body_of(resp)["next_cursor"]
    for _ in range(2):
        _, resp = _ops_of_a_page(big_id, cursor)
        assert METER.snapshot() == {"table:get": 1}, METER.snapshot()
        cursor = body_of(resp)["next_cursor"]
    assert body_of(resp)["total"] == len(items)
    # A process that has not seen the job (another instance) pays the three reads again, never more.
    monkeypatch.setattr(service, "_PARSED", service._ParsedCache(1))
    _, resp = _ops_of_a_page(big_id, cursor)
    assert METER.snapshot() == {"table:get": 1, "blob:get": 2}, METER.snapshot()
    page = get(big_id, {"limit": "50"})
    METER.reset()
    assert get(big_id, {"limit": "50"}, headers={"If-None-Match": page.headers["ETag"]}).status_code == 304
    assert METER.snapshot() == {"table:get": 1}, "a 304 reads the row only"


def test_the_parsed_cache_is_bounded_and_drops_the_oldest() -> None:
    from shared.api.service import _ParsedCache

    cache = _ParsedCache(10)
    cache.put(("t", "a", "v1"), "A", 6)
    cache.put(("t", "b", "v1"), "B", 4)
    assert cache.get(("t", "a", "v1")) == "A"  # now the newest
    cache.put(("t", "c", "v1"), "C", 5)  # over 10: the oldest (b) goes
    assert cache.get(("t", "b", "v1")) is None and cache.get(("t", "a", "v1")) is None
    assert cache.get(("t", "c", "v1")) == "C"
    cache.put(("t", "d", "v1"), "D", 11)  # larger than the whole budget: never kept
    assert cache.get(("t", "d", "v1")) is None and cache.get(("t", "c", "v1")) == "C"


def test_csv_has_text_and_metadata_columns_and_is_formula_safe() -> None:
    import csv

    job_id, items, _ = plant(40, tricky=True)
    resp = http("get_job_result", "GET", f"jobs/{job_id}/result", params={"format": "csv"},
                route_params={"id": job_id})
    assert resp.status_code == 200
    rows = list(csv.DictReader(io.StringIO(resp.get_body().decode())))
    header = list(rows[0])
    assert header[:10] == ["response_id", "theme_id", "theme_label", "confidence", "bucket", "reason", "seed_codes",
                           "sentiment", "sentiment_score", "text"]
    assert header[10:] == ["plan", "region", "nps"]
    texts = {it["id"]: it["text"] for it in items}
    first_rows = {r["response_id"]: r for r in reversed(rows)}
    assert len(first_rows) == len(items)
    for rid, r in first_rows.items():
        want = texts[rid]
        assert r["text"] == ("'" + want if want[:1] in "=+-@" else want)
    for r in rows:
        for col in ("text", "plan"):
            assert r[col][:1] not in ("=", "+", "-", "@"), r
    assert sum(1 for r in rows if r["plan"].startswith("'=")) > 0


def test_xlsx_has_the_sheets_the_rows_and_inert_cells() -> None:
    openpyxl = pytest.importorskip("openpyxl")
    job_id, items, doc = plant(50, tricky=True)
    resp = http("get_job_result", "GET", f"jobs/{job_id}/result", params={"format": "xlsx"},
                route_params={"id": job_id})
    assert resp.status_code == 200, resp.get_body()
    assert resp.headers["Content-Type"] == "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
    assert f'filename="{job_id}.xlsx"' in resp.headers["Content-Disposition"]
    wb = openpyxl.load_workbook(io.BytesIO(resp.get_body()))
    assert wb.sheetnames == ["Themes", "Responses", "Breakdowns", "Impact"]
    sheet = wb["Responses"]
    header = [c.value for c in next(sheet.iter_rows(max_row=1))]
    assert header[:2] == ["response_id", "text"] and header[-3:] == ["plan", "region", "nps"]
    body = list(sheet.iter_rows(min_row=2))
    assert [r[0].value for r in body] == [it["id"] for it in items]
    for r, it in zip(body, items, strict=True):
        text = r[1]
        assert text.data_type == "s", "a text is never a formula"
        assert text.value == it["text"].replace("\x07", "").replace("\x00", "")
        assert r[header.index("nps")].value == it["metadata"]["nps"]
    formulas = [c.coordinate for s in wb.worksheets for row in s.iter_rows() for c in row if c.data_type == "f"]
    assert formulas == []
    assert any(r[1].value.startswith("=") for r in body), "the planted formula-like text is kept, as text"
    themes = wb["Themes"]
    assert [c.value for c in next(themes.iter_rows(max_row=1))][:4] == ["theme_id", "level", "parent", "label"]
    assert {r[0].value for r in themes.iter_rows(min_row=2)} == {t["id"] for t in doc["themes"]} | {
        s["id"] for s in doc["subthemes"]}
    impact = [[c.value for c in r] for r in wb["Impact"].iter_rows()]
    assert impact[0][:2] == ["key", "nps"] and impact[2][:2] == ["overall", doc["impact"]["overall"]] and impact[6][:8] == ["theme_id", "label", "n", "score", "impact", "ci_low",
                                                             "ci_high", "small_n"]
    assert impact[4][0] == "min_n"  # the threshold under which a row is small_n (schema 1.3)
    rows = impact[7:7 + len(doc["impact"]["themes"])]
    assert [r[0] for r in rows] == [t["theme_id"] for t in doc["impact"]["themes"]]
    assert [r[4] for r in rows] == pytest.approx([t["impact"] for t in doc["impact"]["themes"]])
    tail = [r[:2] for r in impact[7 + len(rows):] if any(v is not None for v in r)]
    assert tail == ([["note", doc["impact"]["note"]]] if doc["impact"].get("note") else [])
    breakdowns = list(wb["Breakdowns"].iter_rows(min_row=2))
    assert len(breakdowns) == sum(len(g["themes"]) for b in doc["breakdowns"] for g in b["groups"])


def test_xlsx_without_impact_has_no_impact_sheet() -> None:
    openpyxl = pytest.importorskip("openpyxl")
    job_id, _, _ = plant(12, impact=False)
    resp = http("get_job_result", "GET", f"jobs/{job_id}/result", params={"format": "xlsx"},
                route_params={"id": job_id})
    assert openpyxl.load_workbook(io.BytesIO(resp.get_body())).sheetnames == ["Themes", "Responses", "Breakdowns"]


def test_a_segments_usable_count_is_the_n_its_breakdown_states() -> None:
    # A researcher filters a segment and expects the breakdown's n for it: the listing keeps the segment's unusable
    # rows (marked by their bucket) in `total`, and `usable` is the breakdown's n, from the same document.
    from pipelines.thematic import derive

    job_id, items, doc = plant(240)
    meta = {str(it["id"]): it["metadata"] for it in items}
    stated = derive.derived(doc, meta, breakdown_by=["plan"]).breakdowns[0]
    n_of = {g["value"]: g["n"] for g in stated["groups"]}
    unusable = {a["response_id"] for a in doc["assignments"] if a["bucket"] == "unusable"}
    for plan in ("free", "pro", "team"):
        page = body_of(get(job_id, {"metadata[plan]": plan, "limit": "1"}))
        in_segment = [it["id"] for it in items if it["metadata"]["plan"] == plan]
        assert page["total"] == len(in_segment)
        assert page["usable"] == n_of[plan] == len([i for i in in_segment if i not in unusable])
        assert any(i in unusable for i in in_segment), "no unusable row in the segment: the test would prove nothing"


def test_a_broad_themes_count_is_what_its_filter_finds_in_multi_label_mode() -> None:
    # multi_label: a response whose primary theme is in p2 and whose secondary theme is in p1 was listed by
    # theme=p1 but not counted in p1's count (the primary theme's parent only), so the filter found more than
    # parents[].count said. A parent's count is now its responses with any theme in it (codebook.level_ids), as a
    # theme counts every response with it; an edit (a rename changes no assignment) recounts by that rule.
    job_id, _, doc = plant(400, parents=True, impact=False)
    crossing = [a for a in doc["assignments"] if len({("p1" if int(r["theme_id"][1:]) <= 4 else "p2")
                                                       for r in a["themes"]}) > 1]
    assert crossing, "no response with themes under two parents: the test would prove nothing"
    result = http("get_job_result", "GET", f"jobs/{job_id}/result", route_params={"id": job_id})
    edit = http("edit_job_themes", "PATCH", f"jobs/{job_id}/themes", route_params={"id": job_id},
                headers={"If-Match": result.headers["ETag"]},
                body={"edits": [{"op": "rename", "theme": "t1", "label": "Renamed theme"}]})
    assert edit.status_code == 200, edit.get_body()
    edited = body_of(http("get_job_result", "GET", f"jobs/{job_id}/result", route_params={"id": job_id}))
    for p in edited["parents"]:
        page = body_of(get(job_id, {"theme": p["id"], "limit": "1"}))
        assert page["total"] == page["usable"] == p["count"], (p["id"], page["total"], p["count"])
        children = {c: next(t["count"] for t in edited["themes"] if t["id"] == c) for c in p["children"]}
        assert p["count"] >= max(children.values())
    assert [p["count"] for p in edited["parents"]] != [p["count"] for p in doc["parents"]]  # the old count differed
    # The xlsx Themes sheet states the same counts.
    openpyxl = pytest.importorskip("openpyxl")
    resp = http("get_job_result", "GET", f"jobs/{job_id}/result", params={"format": "xlsx"}, route_params={"id": job_id})
    assert resp.status_code == 200
    wb = openpyxl.load_workbook(io.BytesIO(resp.get_body()), read_only=True)
    broad = {r[0]: r[4] for r in wb["Themes"].iter_rows(min_row=2, values_only=True) if r[1] == "broad"}
    assert broad == {p["id"]: p["count"] for p in edited["parents"]}
