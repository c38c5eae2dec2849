"""Issue 15 end to end through the local host (devhost + Azurite): breakdowns and sentiment, a codebook edit under
If-Match, a second wave compared with (and seeded by) the edited first, and every bad input a 4xx naming the field."""

from __future__ import annotations

import random
from typing import Any

from pipelines.thematic.result import ThematicResult
from tests.e2e.conftest import Api, api, env, host  # noqa: F401 - pytest fixtures
from tests.support.thematic_data import feedback

OTHER = {"x-thematiq-tenant": "other-tenant"}


def _wave(n_delivery: int, n_rest: int, seed: int, offset: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    items, truth = feedback(per_theme=max(n_delivery, n_rest), seed=seed)
    out = []
    taken: dict[str, int] = {}
    for it, t in zip(items, truth, strict=True):
        want = n_delivery if t == "delivery" else n_rest
        if taken.get(t, 0) >= want:
            continue
        taken[t] = taken.get(t, 0) + 1
        pro = rng.random() < (0.7 if t == "delivery" else 0.2)
        out.append({"id": offset + len(out), "text": it["text"],
                    "metadata": {"plan": "pro" if pro else "free", "nps": rng.randint(0, 10)}})
    return out


def _problem(api: Api,  # noqa: F811 - a parameter, not the fixture
             body: dict[str, Any], status: int, field: str, headers: dict[str, str] | None = None) -> None:
    code, h, problem = api.call("POST", "/api/jobs", body, headers=headers)
    assert code == status, problem
    assert "application/problem+json" in h.get("Content-Type", h.get("content-type", ""))
    assert field in [e["field"] for e in problem["errors"]], problem


def _jobs(api: Api,  # noqa: F811
          headers: dict[str, str] | None = None) -> set[str]:
    status, _, body = api.call("GET", "/api/jobs?limit=200", headers=headers)
    assert status == 200
    return {j["id"] for j in body["items"]}


def _result(api: Api,  # noqa: F811
             job: dict[str, Any], fmt: str = "json") -> tuple[dict[str, str], Any]:
    status, headers, body = api.call("GET", f"/api/jobs/{job['id']}/result?format={fmt}")
    assert status == 200, body
    return headers, body


def test_breakdowns_sentiment_codebook_edit_and_a_compared_second_wave(api: Api) -> None:  # noqa: F811 - fixture
    first = _wave(20, 20, seed=1, offset=0)
    params = {"llm": "off", "min_theme_size": 6, "breakdown_by": ["plan", "nps"], "min_group_size": 10,
              "score": {"key": "nps", "scale": "nps"}}
    job1 = api.wait(api.submit("thematic", params, first)["id"], timeout=240)
    assert job1["status"] == "succeeded", job1
    headers, doc = _result(api, job1)
    ThematicResult.model_validate(doc)
    # Issue 23: each theme's impact on the NPS, in the stored result and the report; every job has an instrument.
    assert set(doc["impact"]) == {"key", "scale", "overall", "n", "min_n", "interval", "themes", "single_label", "note"}
    assert doc["impact"]["single_label"] is True and doc["impact"]["note"]  # one theme per response (schema 1.5)
    assert doc["impact"]["key"] == "nps" and doc["impact"]["interval"] == "permutation"
    assert {t["theme_id"] for t in doc["impact"]["themes"]} == {t["id"] for t in doc["themes"]}
    assert doc["instrument"]["codes"] and doc["schema_version"] == "1.7"
    assert [b["field"] for b in doc["breakdowns"]] == ["plan", "nps"] and doc["breakdowns"][1]["kind"] == "nps"
    assert doc["sentiment"]["source"] == "model"  # the default on the fast encoder's vectors
    assert all(t["sentiment"] is not None for t in doc["themes"])
    etag = headers["ETag"]

    # The codebook, with the same ETag as the result it was rendered from.
    h, book = _result(api, job1, "codebook")
    assert h["ETag"] == etag and [t["id"] for t in book["themes"]] == [t["id"] for t in doc["themes"]]
    a, b = book["themes"][0]["id"], book["themes"][1]["id"]
    path = f"/api/jobs/{job1['id']}/themes"
    rename = {"edits": [{"op": "rename", "theme": a, "label": "Renamed by the researcher"}]}
    # No If-Match: 428; an unknown theme: 422 naming the edit's field; neither changes the result.
    status, _, problem = api.call("PATCH", path, rename)
    assert status == 428 and problem["errors"][0]["field"] == "If-Match", problem
    status, _, problem = api.call("PATCH", path, {"edits": [{"op": "delete", "theme": "t999"}]},
                                  headers={"If-Match": etag})
    assert status == 422 and problem["errors"][0]["field"] == "edits[0].theme", problem
    # Another tenant cannot see or edit the job.
    status, _, _ = api.call("PATCH", path, rename, headers={"If-Match": etag, **OTHER})
    assert status == 404
    status, h, edited = api.call("PATCH", path, rename, headers={"If-Match": etag})
    assert status == 200, edited
    new_etag = h["ETag"]
    assert new_etag != etag and edited["themes"][0]["name"] == "Renamed by the researcher"
    assert [e["op"] for e in edited["edits"]] == ["rename"]
    # A second edit made on the first version is stale: 412, and nothing changes.
    status, _, problem = api.call("PATCH", path, {"edits": [{"op": "merge", "themes": [a, b]}]},
                                  headers={"If-Match": etag})
    assert status == 412 and problem["errors"][0]["field"] == "If-Match", problem
    h, after = _result(api, job1)
    assert h["ETag"] == new_etag and b in [t["id"] for t in after["themes"]] and len(after["edits"]) == 1
    assert next(t for t in after["themes"] if t["id"] == a)["label"] == "Renamed by the researcher"
    # The edited result renders as Markdown with the new name, and its tables follow the edit.
    _, md = _result(api, job1, "md")
    assert "Renamed by the researcher" in (md.decode() if isinstance(md, bytes) else md)
    assert "## Impact on nps" in (md.decode() if isinstance(md, bytes) else md)

    # Wave 2, compared with the edited wave 1: the renamed theme keeps its id and name.
    second = _wave(40, 15, seed=2, offset=1000)
    job2 = api.wait(api.submit("thematic", {"llm": "off", "min_theme_size": 6, "compare_to": job1["id"]},
                               second)["id"], timeout=240)
    assert job2["status"] == "succeeded", job2
    _, doc2 = _result(api, job2)
    ThematicResult.model_validate(doc2)
    comparison = doc2["comparison"]
    assert comparison["job_id"] == job1["id"] and comparison["n_then"] == after["run"]["counts"]["usable"]
    # Coded with wave 1's instrument (stored with wave 1's result), so nothing is new that wave 1 had.
    assert comparison["mode"] == "inherit" and comparison["instrument"] == "centroids"
    assert all(r["p"] is None for r in comparison["themes"] if r["status"] == "new")
    rows = {r["theme_id"]: r for r in comparison["themes"]}
    assert rows[a]["label"] == "Renamed by the researcher" and rows[a]["status"] in ("kept", "gone")
    assert set(comparison["then"]) == {t["id"] for t in after["themes"]}

    # The edited codebook seeds a third job as seed_themes, sent back exactly as it was served.
    _, book = _result(api, job1, "codebook")
    job3 = api.wait(api.submit("thematic", {"llm": "off", "min_theme_size": 6, "seed_themes": book["themes"]},
                               second)["id"], timeout=240)
    assert job3["status"] == "succeeded", job3
    _, doc3 = _result(api, job3)
    assert "Renamed by the researcher" in [s["name"] for s in doc3["seed_themes"]]

    # compare_to: another tenant's job and an unknown one are the same 404; nothing is stored.
    other_before, mine_before = _jobs(api, OTHER), _jobs(api)
    body = {"pipeline": "thematic", "params": {"compare_to": job1["id"]}, "input": second}
    _problem(api, body, 404, "params.compare_to", headers=OTHER)
    _problem(api, {**body, "params": {"compare_to": "0" * 28}}, 404, "params.compare_to")
    _problem(api, {**body, "params": {"compare_to": "nope"}}, 422, "params.compare_to")
    assert _jobs(api, OTHER) == other_before and _jobs(api) == mine_before


def test_every_new_parameter_rejects_bad_input_with_a_problem_naming_the_field(api: Api) -> None:  # noqa: F811
    items = _wave(5, 5, seed=3, offset=0)
    before = _jobs(api)
    base = {"pipeline": "thematic", "input": items}
    _problem(api, {**base, "params": {"breakdown_by": ["plan", "regoin"]}}, 422, "params.breakdown_by[1]")
    _problem(api, {**base, "params": {"breakdown_by": ["a", "b", "c", "d", "e", "f"]}}, 422, "params.breakdown_by")
    _problem(api, {**base, "params": {"breakdown_by": ["plan", "plan"]}}, 422, "params.breakdown_by")
    _problem(api, {**base, "params": {"sentiment_from": "stars"}}, 422, "params.sentiment_from")
    _problem(api, {**base, "params": {"sentiment_from": "plan"}}, 422, "params.sentiment_from")
    # A declared scale (schema 1.4): one of 1-5, 1-7, 1-10, 0-10, and every value on it (nps is 0-10 here).
    _problem(api, {**base, "params": {"sentiment_from": {"key": "nps", "scale": "0-100"}}}, 422,
             "params.sentiment_from.scale")
    _problem(api, {**base, "params": {"sentiment_from": {"key": "nps", "scale": "1-5"}}}, 422,
             "params.sentiment_from.scale")
    _problem(api, {**base, "params": {"sentiment_from": {"key": "plan", "scale": "1-5"}}}, 422,
             "input[0].metadata.plan")
    _problem(api, {**base, "params": {"sentiment": "llm-please"}}, 422, "params.sentiment")
    _problem(api, {**base, "params": {"sentiment": "llm"}}, 422, "params.sentiment")  # no provider here
    _problem(api, {**base, "params": {"sentiment": "llm", "llm": "off"}}, 422, "params.sentiment")
    _problem(api, {**base, "params": {"min_group_size": 0}}, 422, "params.min_group_size")
    # Issue 23: a score must name a metadata key the responses carry, hold numbers, and fit its scale.
    _problem(api, {**base, "params": {"score": {"key": "rating", "scale": "nps"}}}, 422, "params.score.key")
    _problem(api, {**base, "params": {"score": {"key": "plan", "scale": "numeric"}}}, 422, "params.score.key")
    _problem(api, {**base, "params": {"score": {"key": "nps", "scale": "stars"}}}, 422, "params.score.scale")
    _problem(api, {**base, "params": {"score": {"key": "nps"}, "compare_mode": "both"}}, 422, "params.compare_mode")
    # A declared rating range (schema 1.7, researcher46): the 0-10 answers do not fit 0-5, for the score or the
    # sentiment; "0-10" is no score range (the score's 0-10 reading is "nps"); an inferred 0-5 is still refused.
    _problem(api, {**base, "params": {"score": {"key": "nps", "scale": "0-5"}}}, 422, "params.score.scale")
    _problem(api, {**base, "params": {"score": {"key": "nps", "scale": "0-10"}}}, 422, "params.score.scale")
    _problem(api, {**base, "params": {"sentiment_from": {"key": "nps", "scale": "0-5"}}}, 422,
             "params.sentiment_from.scale")
    five = [{**it, "metadata": {**it["metadata"], "sat": n % 6}} for n, it in enumerate(items)]
    _problem(api, {**base, "input": five, "params": {"sentiment_from": "sat"}}, 422, "params.sentiment_from")
    _problem(api, {**base, "input": five, "params": {"score": {"key": "sat", "scale": "1-5"}}}, 422,
             "params.score.scale")
    assert _jobs(api) == before


def test_one_metadata_key_is_read_on_one_scale_by_the_sentiment_the_score_and_its_breakdown(api: Api) -> None:  # noqa: F811
    # consist46: sentiment_from and score on one key with two declared ranges was accepted, each reading the key its
    # own way (a 0-5 rating for the score, NPS groups for the sentiment and the breakdown): now a 422 naming
    # params.sentiment_from.scale, nothing stored. A plain sentiment_from key reads the range the score declares:
    # the 0-5 answers alone are a 422 (ambiguous), with the score's "0-5" they are read 0-1 / 2-3 / 4-5.
    items = [{**it, "metadata": {**it["metadata"], "sat": n % 6}} for n, it in enumerate(_wave(10, 10, seed=4,
                                                                                              offset=0))]
    before = _jobs(api)
    base = {"pipeline": "thematic", "input": items}
    # Every answer (0-5 integers) fits both declarations: the contradiction is the only fault.
    for sentiment, score in (("0-10", "0-5"), ("0-5", "nps")):
        code, h, problem = api.call("POST", "/api/jobs", {**base, "params": {
            "llm": "off", "sentiment_from": {"key": "sat", "scale": sentiment},
            "score": {"key": "sat", "scale": score}}})
        assert code == 422 and "application/problem+json" in h.get("Content-Type", h.get("content-type", "")), problem
        assert [e["field"] for e in problem["errors"]] == ["params.sentiment_from.scale"], problem
        assert "params.score.scale" in problem["errors"][0]["message"], problem
    _problem(api, {**base, "params": {"llm": "off", "sentiment_from": "sat"}}, 422, "params.sentiment_from")
    assert _jobs(api) == before
    job = api.wait(api.submit("thematic", {"llm": "off", "min_theme_size": 6, "sentiment_from": "sat",
                                           "score": {"key": "sat", "scale": "0-5"}, "breakdown_by": ["sat"],
                                           "min_group_size": 1}, items)["id"], timeout=240)
    assert job["status"] == "succeeded", job
    _, doc = _result(api, job)
    assert doc["sentiment"]["rating_range"] == "0-5" and doc["sentiment"]["scale_from"] == "declared"
    sat = {it["id"]: it["metadata"]["sat"] for it in items}
    got = {sat[a["response_id"]]: a["sentiment"]["label"] for a in doc["assignments"] if a.get("sentiment")}
    assert got == {0: "negative", 1: "negative", 2: "neutral", 3: "neutral", 4: "positive", 5: "positive"}
    assert [g["value"] for g in doc["breakdowns"][0]["groups"]] == [str(v) for v in range(6)]
    assert doc["impact"]["scale"] == "0-5"
