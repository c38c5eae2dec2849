"""A thematic job's input and result built without the pipeline: for the responses route, the exports and their
bench, where what matters is the join and the size, not the clustering. Deterministic for a seed.

The result has every field the exports read: themes with parents or sub-themes, assignments with both levels,
secondary themes, sentiment, seed codes, unusable and other rows, breakdowns, and optionally ``impact`` in the
shape issue 23 part 4 adds.
"""

from __future__ import annotations

import random
from typing import Any

WORDS = ("delivery late driver cold food refund app crash login slow support email fees promo code price "
         "order missing item great fast friendly rude menu cheap expensive wait hour minutes").split()


def synthetic_job(n: int, *, themes: int = 8, seed: int = 0, impact: bool = True,
                  tricky: bool = False) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``(input, result)`` of ``n`` responses in ``themes`` themes, each with two sub-themes.

    ``tricky`` makes a few texts and metadata values start with = + - @ and carry control characters.
    """
    rng = random.Random(seed)
    plans, regions = ("free", "pro", "team"), ("EU", "US", "APAC")
    items: list[dict[str, Any]] = []
    assignments: list[dict[str, Any]] = []
    counts = [0] * themes
    for i in range(n):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 30))).capitalize() + "."
        meta: dict[str, Any] = {"plan": rng.choice(plans), "region": rng.choice(regions), "nps": rng.randint(0, 10)}
        if tricky and i % 7 == 0:
            text = ["=HYPERLINK(\"http://x\")", "+1+2", "-3", "@SUM(A1)", "bell\x07 here\x00"][i % 5]
            meta["plan"] = "=cmd|' /C calc'!A0"
        items.append({"id": f"r{i}", "text": text, "metadata": meta})
        roll = rng.random()
        if roll < 0.04:
            assignments.append({"response_id": f"r{i}", "bucket": "unusable", "themes": [], "reason": "gibberish"})
            continue
        score = round(rng.uniform(-1, 1), 4)
        sentiment = {"label": "positive" if score > 0.05 else "negative" if score < -0.05 else "neutral",
                     "score": score}
        if roll < 0.10:
            assignments.append({"response_id": f"r{i}", "bucket": "other", "themes": [], "sentiment": sentiment})
            continue
        t = rng.randrange(themes)
        counts[t] += 1
        refs = [{"theme_id": f"t{t + 1}", "confidence": round(rng.uniform(0.3, 0.9), 4)}]
        if rng.random() < 0.15:
            refs.append({"theme_id": f"t{(t + 1) % themes + 1}", "confidence": round(rng.uniform(0.3, 0.6), 4)})
        assignments.append({
            "response_id": f"r{i}", "bucket": "theme", "themes": refs, "broad": f"t{t + 1}",
            "fine": f"t{t + 1}.{rng.randint(1, 2)}", "sentiment": sentiment,
            "seed_codes": [{"name": "Fees", "confidence": 0.5, "coded_by": "embedding"}] if t == 0 else None,
        })
    usable = sum(1 for a in assignments if a["bucket"] != "unusable")
    theme_docs = [
        {"id": f"t{k + 1}", "label": f"Theme {k + 1} " + WORDS[k % len(WORDS)], "description": f"About {WORDS[k]}.",
         "keywords": [WORDS[k], WORDS[k + 1]], "count": counts[k], "share": counts[k] / max(usable, 1),
         "quotes": [], "labelled_by": "keywords", "subthemes": [f"t{k + 1}.1", f"t{k + 1}.2"],
         "sentiment": {"positive": 1, "neutral": 1, "negative": 1, "mean": 0.0}}
        for k in range(themes)
    ]
    subthemes = [
        {"id": f"t{k + 1}.{j}", "parent": f"t{k + 1}", "label": f"Sub {k + 1}.{j}", "description": "",
         "keywords": [], "count": 0, "share": 0.0}
        for k in range(themes) for j in (1, 2)
    ]
    groups = [{"value": p, "n": n // 3, "themes": [
        {"theme_id": f"t{k + 1}", "count": counts[k] // 3, "share": 0.1, "lift": 1.0, "p": 0.5, "q": 0.6,
         "significant": False} for k in range(themes)]} for p in plans]
    doc: dict[str, Any] = {
        "schema_version": "1.1",
        "themes": theme_docs,
        "parents": [],
        "subthemes": subthemes,
        "levels": {"broad": "themes", "fine": "subthemes", "broad_count": themes, "fine_count": 2 * themes},
        "assignments": assignments,
        "run": {"pipeline": "thematic", "pipeline_version": "synthetic", "embedding_model": {}, "params": {},
                "timings_seconds": {}, "resumed_stages": [],
                "theme_count": {"criterion": "fixed", "explanation": "synthetic", "scores": []},
                "llm": {"mode": "off", "used": False, "model": None, "calls": 0, "cached_calls": 0,
                        "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0},
                "counts": {"responses": n, "usable": usable, "themed": sum(counts), "other": usable - sum(counts),
                           "unusable": {"gibberish": n - usable}, "pii_redacted": {}}},
        "breakdowns": [{"field": "plan", "kind": "categorical", "groups": groups}],
    }
    if impact:
        doc["impact"] = {"key": "nps", "scale": "nps", "overall": 12.5, "n": usable, "themes": [
            {"theme_id": f"t{k + 1}", "label": theme_docs[k]["label"], "n": counts[k], "score": 10.0 - k,
             "impact": -1.5 + 0.3 * k, "ci_low": -3.0 + 0.3 * k, "ci_high": 0.2 + 0.3 * k} for k in range(themes)]}
    return items, doc


def planted_job(platform: Any, n: int = 30, seed: int = 30) -> str:
    """A thematic job submitted through the API and marked succeeded with :func:`synthetic_job`'s result inline in
    its row, as the worker would leave it: for the unit tier's route tests (no pipeline run, no child process)."""
    import json

    from shared.core.jobs import Status, utcnow
    from tests.support.direct import body_of, http

    items, doc = synthetic_job(n, seed=seed, impact=False)
    resp = http("submit_job", "POST", "jobs", body={"pipeline": "thematic", "params": {"llm": "off"}, "input": items})
    assert resp.status_code == 202, resp.get_body()
    job_id = str(body_of(resp)["id"])
    row = platform.stores.jobs.get("local", job_id)
    body = json.dumps(doc, separators=(",", ":")).encode()
    platform.stores.jobs.update(row, status=Status.SUCCEEDED, finished_at=utcnow(), result_bytes=len(body),
                                result_blob=f"local/{job_id}/result-1.json", result_inline=body)
    return job_id

