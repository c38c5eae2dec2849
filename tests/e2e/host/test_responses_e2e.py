"""``GET /api/jobs/{id}/responses`` through the local host (devhost + Azurite) on a real thematic job: paging,
each filter, another tenant's job, bad filters and cursors as problem+json, ETag 304, and the xlsx download."""

from __future__ import annotations

import io
import random
import urllib.parse
from typing import Any

import pytest

from tests.e2e.conftest import Api, api, env, host  # noqa: F401 - pytest fixtures
from tests.support.thematic_data import feedback

OTHER = {"x-thematiq-tenant": "other-tenant"}


@pytest.fixture(scope="module")
def job(api: Api) -> tuple[str, list[dict[str, Any]], dict[str, Any]]:  # noqa: F811 - the fixture
    rng = random.Random(2)
    items, _ = feedback(per_theme=12, seed=2)
    items = [{"id": it["id"], "text": it["text"], "metadata": {"plan": rng.choice(["free", "pro"]), "nps": rng.randint(0, 10),
                                                              "city": f"Paris{', FR' if i % 3 else ''}"}}
             for i, it in enumerate(items)] + [{"id": 999, "text": ""}]
    done = api.wait(api.submit("thematic", {"llm": "off", "min_theme_size": 3}, items)["id"], timeout=300)
    assert done["status"] == "succeeded", done
    status, _, doc = api.call("GET", f"/api/jobs/{done['id']}/result")
    assert status == 200
    return done["id"], items, doc


def _pages(api: Api, job_id: str, query: dict[str, str], limit: int = 9) -> list[dict[str, Any]]:  # noqa: F811
    rows: list[dict[str, Any]] = []
    cursor = None
    while True:
        q = {**query, "limit": str(limit), **({"cursor": cursor} if cursor else {})}
        status, _, page = api.call("GET", f"/api/jobs/{job_id}/responses?{urllib.parse.urlencode(q)}")
        assert status == 200, page
        rows += page["items"]
        cursor = page["next_cursor"]
        if not cursor:
            assert page["total"] == len(rows)
            return rows


def test_paging_and_each_filter_against_the_result(api: Api, job: Any) -> None:  # noqa: F811
    job_id, items, doc = job
    rows = _pages(api, job_id, {})
    assert [(r["id"], r["text"], r["metadata"]) for r in rows] == [
        (it["id"], it["text"], it.get("metadata", {})) for it in items]
    by_id = {a["response_id"]: a for a in doc["assignments"]}
    theme = doc["themes"][0]["id"]
    cases = {
        "theme": (theme, lambda it, a: theme in {t["theme_id"] for t in a["themes"]}),
        "bucket": ("unusable", lambda it, a: a["bucket"] == "unusable"),
        "sentiment": ("negative", lambda it, a: (a.get("sentiment") or {}).get("label") == "negative"),
        "metadata[plan]": ("pro", lambda it, a: (it.get("metadata") or {}).get("plan") == "pro"),
    }
    subs = doc.get("subthemes") or []
    if subs:
        cases["subtheme"] = (subs[0]["id"], lambda it, a: a.get("fine") == subs[0]["id"])
    for name, (value, keep) in cases.items():
        want = [it["id"] for it in items if keep(it, by_id[it["id"]])]
        assert want, name
        assert [r["id"] for r in _pages(api, job_id, {name: value})] == want, name


def test_tenant_bad_input_and_etag(api: Api, job: Any) -> None:  # noqa: F811
    job_id, _, _ = job
    status, _, body = api.call("GET", f"/api/jobs/{job_id}/responses", headers=OTHER)
    assert status == 404 and body["status"] == 404
    for query, code, field in [("theme=t404", 422, "theme"), ("cursor=%%%", 400, "cursor"), ("nope=1", 422, "nope"),
                               ("limit=9999", 422, "limit"), ("metadata%5Bzip%5D=1", 422, "metadata[zip]")]:
        status, headers, body = api.call("GET", f"/api/jobs/{job_id}/responses?{query}")
        assert status == code, (query, body)
        assert "application/problem+json" in headers.get("Content-Type", "")
        assert field in [e["field"] for e in body["errors"]], body
    status, headers, _ = api.call("GET", f"/api/jobs/{job_id}/responses?limit=5")
    assert status == 200
    status, again, body = api.call("GET", f"/api/jobs/{job_id}/responses?limit=5",
                                   headers={"If-None-Match": headers["ETag"]})
    assert status == 304 and not body and again["ETag"] == headers["ETag"]


def test_a_repeated_parameter_is_named_and_a_comma_belongs_to_its_value(api: Api, job: Any) -> None:  # noqa: F811
    # The host joins a repeated name's values with "," (devhost as Azure's host): city=Paris&city= FR arrived as the
    # one value "Paris, FR" and matched those responses; nps=7&nps=8 as "7,8", which matched none (input42).
    job_id, items, _ = job
    base = f"/api/jobs/{job_id}"
    for query, field in [("metadata%5Bnps%5D=7&metadata%5Bnps%5D=8", "metadata[nps]"),
                         ("metadata%5Bcity%5D=Paris&metadata%5Bcity%5D=%20FR", "metadata[city]"),
                         ("theme=t1&theme=t2", "theme"), ("limit=5&limit=5", "limit")]:
        status, headers, body = api.call("GET", f"{base}/responses?{query}")
        assert status == 422, (query, body)
        assert "application/problem+json" in headers.get("Content-Type", "")
        assert [e["field"] for e in body["errors"]] == [field], body
        assert "given 2 times" in body["errors"][0]["message"]
    want = [it["id"] for it in items if (it.get("metadata") or {}).get("city") == "Paris, FR"]
    assert want and [r["id"] for r in _pages(api, job_id, {"metadata[city]": "Paris, FR"})] == want
    status, _, body = api.call("GET", f"{base}/result?format=csv&format=md")
    assert status == 422 and [e["field"] for e in body["errors"]] == ["format"], body


def test_xlsx_download_reads_back(api: Api, job: Any) -> None:  # noqa: F811
    openpyxl = pytest.importorskip("openpyxl")
    job_id, items, _ = job
    status, headers, body = api.call("GET", f"/api/jobs/{job_id}/result?format=xlsx")
    assert status == 200 and headers["Content-Type"].startswith("application/vnd.openxmlformats")
    wb = openpyxl.load_workbook(io.BytesIO(body), read_only=True)
    assert wb.sheetnames == ["Themes", "Responses", "Breakdowns"]
    rows = list(wb["Responses"].iter_rows(values_only=True))
    assert rows[0][:2] == ("response_id", "text")
    assert [r[1] or "" for r in rows[1:]] == [it["text"] for it in items]
