"""The thematic pipeline through the real HTTP API in a local host process (Azurite + devhost)."""

from __future__ import annotations

from typing import Any

from pipelines.thematic.result import ThematicResult
from tests.e2e.conftest import Api, api, env, host  # noqa: F401 - pytest fixtures
from tests.support.thematic_data import feedback


def test_thematic_job_over_http(api: Api) -> None:  # noqa: F811 - fixture
    items, _ = feedback(per_theme=10)
    job = api.submit("thematic", {"llm": "off", "min_theme_size": 3}, items)
    done = api.wait(job["id"], timeout=180)
    assert done["status"] == "succeeded", done
    status, _, doc = api.call("GET", done["links"]["result"])
    assert status == 200
    ThematicResult.model_validate(doc)
    assert doc["themes"] and len(doc["assignments"]) == len(items)
    status, headers, csv_body = api.call("GET", done["links"]["result"] + "?format=csv")
    assert status == 200 and "text/csv" in headers.get("Content-Type", headers.get("content-type", ""))
    text = csv_body.decode() if isinstance(csv_body, bytes) else str(csv_body)
    assert text.startswith("response_id,theme_id")
    status, _, md = api.call("GET", done["links"]["result"] + "?format=md")
    assert status == 200 and "# Thematic analysis" in (md.decode() if isinstance(md, bytes) else str(md))


def test_thematic_validation_names_field(api: Api) -> None:  # noqa: F811 - fixture
    status, _, body = api.call("POST", "/api/jobs", {"pipeline": "thematic", "params": {},
                                                      "input": [{"id": 1, "text": "a"}, {"id": 1, "text": "b"}]})
    assert status == 422
    assert any(e["field"].endswith("input[1].id") for e in body["errors"]), body
    status, _, body = api.call("POST", "/api/jobs", {"pipeline": "thematic", "params": {"bogus": 1},
                                                      "input": [{"id": 1, "text": "a"}]})
    assert status == 422


def test_thematic_embed_fans_out_and_matches_in_process(api: Api) -> None:  # noqa: F811 - fixture
    """A small fan-out threshold forces the embed map stage: the job waits for its chunks, then resumes."""
    items, _ = feedback(per_theme=15)  # 60 responses → 4 chunks of ≤ 16
    params = {"llm": "off", "min_theme_size": 3, "seed": 7}
    inline = api.submit("thematic", params, items)
    fanned = api.submit("thematic", {**params, "fanout_min_responses": 20, "fanout_chunk_size": 16}, items)
    waiting = api.wait(fanned["id"], timeout=120, until=lambda j: j["status"] in ("waiting", "succeeded", "failed"))
    assert waiting["status"] == "waiting", waiting
    docs = []
    for job in (inline, fanned):
        done = api.wait(job["id"], timeout=180)
        assert done["status"] == "succeeded", done
        status, _, doc = api.call("GET", done["links"]["result"])
        assert status == 200
        ThematicResult.model_validate(doc)
        docs.append(doc)
    assert "embed_fanout" in docs[1]["run"]["resumed_stages"] and "clean" in docs[1]["run"]["resumed_stages"]
    assert "embed_fanout" not in docs[0]["run"]["resumed_stages"]

    def summary(doc: dict[str, Any]) -> tuple[Any, Any]:
        themes = [(t["id"], t["label"], t["count"], t["keywords"]) for t in doc["themes"]]
        assigned = [(a["response_id"], a["bucket"], [(r["theme_id"], r["confidence"]) for r in a["themes"]])
                    for a in doc["assignments"]]
        return themes, assigned

    assert summary(docs[1]) == summary(docs[0])
