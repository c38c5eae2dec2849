"""Issue 15 through the whole pipeline (real embedded model, fake platform context): breakdowns, sentiment and
wave-over-wave on synthetic feedback with planted effects."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from pipelines.thematic import PIPELINE, ThematicParams, codebook
from pipelines.thematic import sentiment as S
from pipelines.thematic.baseline import baseline_of
from pipelines.thematic.edit import edit_result
from pipelines.thematic.render import render_md
from pipelines.thematic.result import ThematicResult
from shared.core.errors import ValidationFailed
from tests.support.thematic_data import THEMES, feedback
from tests.support.thematic_fakes import FakeContext

EARLIER = "a" * 28


def _wave(counts: dict[str, int], seed: int, offset: int = 0) -> tuple[list[dict[str, Any]], list[str]]:
    """Responses with ``counts[theme]`` of each theme (ids from ``offset``)."""
    items, truth = [], []
    for theme, n in counts.items():
        its, labels = feedback(per_theme=max(n, 1), seed=seed * 10 + list(THEMES).index(theme))
        chosen = [(it, lab) for it, lab in zip(its, labels, strict=True) if lab == theme][:n]
        for it, lab in chosen:
            items.append({"id": offset + len(items), "text": it["text"]})
            truth.append(lab)
    return items, truth


def _majority(doc: dict[str, Any], truth_by_id: dict[str, str]) -> dict[str, str]:
    """Theme id → the planted theme most of its responses come from."""
    votes: dict[str, Counter[str]] = {}
    for a in doc["assignments"]:
        if a["themes"]:
            votes.setdefault(a["themes"][0]["theme_id"], Counter())[truth_by_id[str(a["response_id"])]] += 1
    return {t: c.most_common(1)[0][0] for t, c in votes.items()}


def _run(items: Any, **params: Any) -> dict[str, Any]:
    p = ThematicParams(**{"llm": "off", "min_theme_size": 8, **params})
    data = PIPELINE.validate_input(items["responses"] if isinstance(items, dict) else items)
    if isinstance(items, dict):
        data = {"responses": data, "baseline": items["baseline"]}
    doc = PIPELINE.run(FakeContext(), p, data)
    ThematicResult.model_validate(doc)
    return doc


def test_a_segment_where_one_theme_is_three_times_as_common_is_flagged_and_a_random_one_is_not() -> None:
    items, truth = feedback(per_theme=60, seed=3)
    rng = random.Random(7)
    for it, t in zip(items, truth, strict=True):
        # Planted: 60% of delivery complaints come from "pro", 20% of everything else; "region" is noise.
        pro = rng.random() < (0.6 if t == "delivery" else 0.2)
        it["metadata"] = {"plan": "pro" if pro else "free", "region": rng.choice(["north", "south"]),
                          **({"nps": rng.randint(0, 10)} if rng.random() < 0.9 else {})}
    # Four themes, as planted: the test is of the breakdown, not of the theme count.
    doc = _run(items, breakdown_by=["plan", "region", "nps"], num_themes=4)
    major = _majority(doc, {str(it["id"]): t for it, t in zip(items, truth, strict=True)})
    by_field = {b["field"]: b for b in doc["breakdowns"]}
    assert by_field["nps"]["kind"] == "nps"
    assert "(missing)" in [g["value"] for g in by_field["nps"]["groups"]]
    pro = next(g for g in by_field["plan"]["groups"] if g["value"] == "pro")
    flagged = {c["theme_id"] for c in pro["themes"] if c["significant"] and (c["lift"] or 0) > 1}
    assert flagged, pro
    assert all(major[t] == "delivery" for t in flagged), (flagged, major)
    # Every group's n adds up to the usable responses, and the noise field has no significant cell.
    assert sum(g["n"] for g in by_field["plan"]["groups"]) == doc["run"]["counts"]["usable"]
    assert not any(c["significant"] for g in by_field["region"]["groups"] for c in g["themes"])


def test_sentiment_per_response_and_per_theme_follows_the_text_or_a_rating_field() -> None:
    items, truth = feedback(per_theme=25, seed=5)
    doc = _run(items)
    # The default: the classifier over the vectors the job embedded with the fast encoder (this CPU's graph).
    assert doc["sentiment"]["source"] == "model" and doc["sentiment"]["model"] == S.MODEL_NAME
    assert "note" not in doc["sentiment"] and doc["sentiment"]["scored"] == doc["run"]["counts"]["usable"]
    major = _majority(doc, {str(it["id"]): t for it, t in zip(items, truth, strict=True)})
    # The staff templates are praise, the rest complaints (data.py); the default must tell them apart. Per
    # planted theme, the count-weighted mean of the themes it makes up (the clustering may split one in two), and
    # every praise theme above every complaint theme. (The lexicon, asked for, fails the last: two complaint
    # themes of this set have a positive mean under it. The classifier has its own miss here: "Customer service
    # agent was ... kind and solved my issue" reads negative, test_sentiment_model.py, so a staff theme made of
    # that template alone sits near 0.)
    themes = [t for t in doc["themes"] if t["id"] in major]
    means = {m: sum(t["sentiment"]["mean"] * t["count"] for t in themes if major[t["id"]] == m)
             / sum(t["count"] for t in themes if major[t["id"]] == m) for m in set(major.values())}
    assert means["staff"] > 0.3 and means["app"] < means["staff"] - 0.3, means
    praise = [t["sentiment"]["mean"] for t in themes if major[t["id"]] == "staff"]
    complaints = [t["sentiment"]["mean"] for t in themes if major[t["id"]] != "staff"]
    assert min(praise) > max(complaints) and max(complaints) < 0, (praise, complaints)
    for a in doc["assignments"]:
        if a["bucket"] != "unusable":
            assert a["sentiment"]["label"] in ("positive", "neutral", "negative")
    # A rating field wins over the text: 1-2 stars negative, 4-5 positive, whatever the words say.
    for i, it in enumerate(items):
        it["metadata"] = {"stars": 1 if i % 2 else 5}
    rated = _run(items, sentiment_from="stars")
    assert rated["sentiment"] == {"source": "metadata", "field": "stars", "model": None, "scale": "stars",
                                  "rating_range": "1-5", "scale_from": "inferred",
                                  "scored": rated["run"]["counts"]["usable"]}
    by_id = {str(it["id"]): it["metadata"]["stars"] for it in items}
    for a in rated["assignments"]:
        if a["bucket"] != "unusable":
            assert a["sentiment"]["label"] == ("negative" if by_id[str(a["response_id"])] == 1 else "positive")


# Answers a lexicon reads the wrong way (the first four from the bundled survey, samples/feedback.csv), and plain
# praise, mixed into a job: by response id, the label the default gives them.
HARD = {
    "h1": ("Support never answered my email.", "not positive"),
    "h2": ("Thanks for nothing.", "not positive"),
    "h3": ("Plus membership price went up but the benefits went down.", "negative"),
    "h4": ("The 'free delivery' promotion still charged me delivery.", "negative"),
    "h5": ("Great food, fast delivery, thank you!", "positive"),
    "h6": ("The driver was lovely.", "positive"),
}


def test_the_default_sentiment_of_a_job_reads_complaints_in_positive_words_the_right_way() -> None:
    items, _ = feedback(per_theme=20, seed=8)
    items += [{"id": i, "text": t} for i, (t, _) in HARD.items()]
    doc = _run(items)
    assert doc["sentiment"]["source"] == "model"
    got = {str(a["response_id"]): a["sentiment"] for a in doc["assignments"] if str(a["response_id"]) in HARD}
    assert set(got) == set(HARD)
    for i, (text, want) in HARD.items():
        label = got[i]["label"]
        assert (label != "positive" if want == "not positive" else label == want), (text, got[i])
    # The lexicon, still the explicit option, calls every one of them positive, the complaints too.
    lexicon = _run(items, sentiment="lexicon")
    assert lexicon["sentiment"]["source"] == "lexicon" and "note" not in lexicon["sentiment"]
    by_lexicon = {str(a["response_id"]): a["sentiment"]["label"] for a in lexicon["assignments"]
                  if str(a["response_id"]) in HARD}
    assert by_lexicon == {i: "positive" for i in HARD}


def test_a_planted_change_between_waves_is_found_and_the_edited_codebook_is_carried_over() -> None:
    first, truth1 = _wave({"delivery": 20, "price": 20, "app": 20, "staff": 20}, seed=1)
    wave1 = _run(first)
    major1 = _majority(wave1, {str(it["id"]): t for it, t in zip(first, truth1, strict=True)})
    # The researcher renames the biggest delivery theme; the next wave must keep that name.
    delivery_id = next(t["id"] for t in wave1["themes"] if major1.get(t["id"]) == "delivery")
    wave1 = edit_result(wave1, {"edits": [{"op": "rename", "theme": delivery_id, "label": "Late parcels"}]}, first)
    assert wave1["edits"][0]["op"] == "rename" and wave1["edits"][0]["at"]

    # Wave 2: delivery three times as common, price gone.
    second, truth2 = _wave({"delivery": 60, "app": 20, "staff": 20}, seed=2, offset=1000)
    wave2 = _run({"responses": second, "baseline": baseline_of(EARLIER, wave1)}, compare_to=EARLIER)
    comparison = wave2["comparison"]
    assert comparison["job_id"] == EARLIER and comparison["n_now"] == wave2["run"]["counts"]["usable"]
    major2 = _majority(wave2, {str(it["id"]): t for it, t in zip(second, truth2, strict=True)})
    rows = {r["theme_id"]: r for r in comparison["themes"]}
    up = [r for r in comparison["themes"] if r["significant"] and r["change"] > 0]
    assert up and all(major2.get(r["theme_id"]) == "delivery" or major1.get(r["theme_id"]) == "delivery" for r in up)
    # The renamed theme kept its id and its new name; price is gone; what stayed kept the wave-1 ids.
    assert rows[delivery_id]["status"] == "kept" and rows[delivery_id]["label"] == "Late parcels"
    assert next(t for t in wave2["themes"] if t["id"] == delivery_id)["label"] == "Late parcels"
    # Price is gone from the answers: each price theme has no answer now, or (issue 23: one instrument codes
    # every answer to its nearest earlier theme above the floor) a few, and a significant fall.
    price_ids = {t for t, m in major1.items() if m == "price"}
    assert price_ids
    for t in price_ids:
        assert t in comparison["gone"] or (rows[t]["significant"] and rows[t]["share_now"] <= 0.05), rows[t]
    themed = [a for a in wave2["assignments"] if a["themes"]]
    kept = sum(1 for a in themed if a["themes"][0]["theme_id"] in comparison["then"])
    assert kept / len(themed) > 0.8
    # No flat theme is called a significant change: app and staff keep 20 responses each.
    for r in comparison["themes"]:
        if r["significant"]:
            assert major1.get(r["theme_id"], major2.get(r["theme_id"])) in ("delivery", "price"), r


def test_a_change_test_with_no_planted_change_flags_nothing_over_many_seeds() -> None:
    from pipelines.thematic import insight

    flagged = 0
    for seed in range(300):
        rng = random.Random(seed)
        shares = [0.3, 0.25, 0.2, 0.15, 0.1]
        then = Counter(rng.choices(range(5), weights=shares, k=400))
        now = Counter(rng.choices(range(5), weights=shares, k=500))
        result = insight.compare({f"t{k}": v for k, v in then.items()}, 400, {f"t{k}": v for k, v in now.items()}, 500)
        flagged += any(r["significant"] for r in result["themes"])
    assert flagged / 300 <= 0.10, flagged


def test_codebook_edits_keep_the_derived_tables_in_step() -> None:
    items, _ = feedback(per_theme=30, seed=9)
    for i, it in enumerate(items):
        it["metadata"] = {"plan": "pro" if i % 3 else "free"}
    doc = _run(items, breakdown_by=["plan"])
    a, b = doc["themes"][0]["id"], doc["themes"][1]["id"]
    merged = edit_result(doc, {"edits": [{"op": "merge", "themes": [a, b], "label": "Both"}]}, items)
    ids = [t["id"] for t in merged["themes"]]
    assert b not in ids and "Both" in [t["label"] for t in merged["themes"]]
    for group in merged["breakdowns"][0]["groups"]:
        assert [c["theme_id"] for c in group["themes"]] == ids
    both = next(t for t in merged["themes"] if t["label"] == "Both")
    assert sum(both["sentiment"][k] for k in ("positive", "neutral", "negative")) == both["count"]
    with pytest.raises(ValidationFailed) as err:
        edit_result(doc, {"edits": [{"op": "rename", "theme": "t999", "label": "x"}]}, items)
    assert err.value.errors[0]["field"] == "edits[0].theme"
    with pytest.raises(ValidationFailed) as err:
        edit_result(doc, {"edits": [{"op": "explode", "theme": a}]}, items)
    assert err.value.errors[0]["field"].startswith("edits[0]")
    assert codebook.codebook(merged)[0]["name"]


def test_seed_themes_accept_the_codebook_as_it_is_served() -> None:
    doc = _run(feedback(per_theme=15, seed=2)[0])
    book = codebook.codebook(doc)
    params = ThematicParams(llm="off", seed_themes=book)
    assert [s.name for s in params.seed_themes or []] == [t["label"] for t in doc["themes"]]


def test_llm_sentiment_labels_the_responses_and_falls_back_to_the_lexicon_when_the_budget_runs_out() -> None:
    from pipelines.thematic.run import run_with
    from tests.support.thematic_fakes import FakeLLM

    items, _ = feedback(per_theme=15, seed=8)
    params = ThematicParams(llm="auto", min_theme_size=5, sentiment="llm")
    llm = FakeLLM()
    doc = run_with(FakeContext(), params, PIPELINE.validate_input(items), client=llm)
    ThematicResult.model_validate(doc)
    assert doc["sentiment"]["source"] == "llm" and doc["sentiment"]["model"] == "fake-gpt"
    assert doc["sentiment"]["note"] is None
    texts = {str(it["id"]): it["text"].lower() for it in items}
    for a in doc["assignments"]:
        if a["bucket"] != "unusable":
            t = texts[str(a["response_id"])]
            want = "positive" if ("great" in t or "helpful" in t) else "negative" if ("late" in t or "crash" in t) else "neutral"
            assert a["sentiment"]["label"] == want, (t, a["sentiment"])
    calls = [p for p, _ in llm.calls if p == "thematic.sentiment"]
    assert len(calls) == -(-doc["run"]["counts"]["usable"] // 25)
    assert doc["run"]["llm"]["calls"] == len(llm.calls)
    # The budget runs out at once: every response is scored by the lexicon, and the result says why.
    broke = run_with(FakeContext(), params, PIPELINE.validate_input(items), client=FakeLLM(fail_after=0))
    assert broke["sentiment"]["source"] == "llm" and "LLMBudgetExhausted" in broke["sentiment"]["note"]
    assert all(a.get("sentiment") for a in broke["assignments"] if a["bucket"] != "unusable")
    with pytest.raises(ValueError):
        ThematicParams(llm="off", sentiment="llm")


def test_multi_label_counts_a_response_in_each_of_its_themes_everywhere_and_an_edit_keeps_the_counts() -> None:
    # A run counted every theme of a response in themes[].count, but the breakdowns and the theme's sentiment
    # counted only its primary theme, and an edit's recount did too: a multi_label theme's count dropped at its
    # first rename (44 -> 43 here), and its heat-map cells did not add up to its count.
    items, _ = feedback(per_theme=30, seed=3)
    rng = random.Random(5)
    for it in items:
        it["metadata"] = {"plan": rng.choice(["pro", "free"])}
    seeds = [{"name": "Late delivery", "description": "the delivery or order arrived late"},
             {"name": "Slow delivery", "description": "delivery took too long, slow courier"},
             {"name": "Prices", "description": "too expensive, price, fees"},
             {"name": "App problems", "description": "the app crashes, bugs"},
             {"name": "Staff", "description": "rude or friendly staff"}]
    doc = _run(items, multi_label=True, seed_themes=seeds, breakdown_by=["plan"])
    having = Counter(str(r["theme_id"]) for a in doc["assignments"] for r in a.get("themes") or [])
    assert sum(len(a.get("themes") or []) > 1 for a in doc["assignments"]) > 0  # the case exists
    for t in doc["themes"]:
        s = t["sentiment"]
        assert t["count"] == having[t["id"]] == s["positive"] + s["neutral"] + s["negative"], t
        cells = [c["count"] for g in doc["breakdowns"][0]["groups"] for c in g["themes"] if c["theme_id"] == t["id"]]
        assert sum(cells) == t["count"], (t["id"], cells)
    renamed = edit_result(doc, {"edits": [{"op": "rename", "theme": doc["themes"][0]["id"], "label": "Renamed"}]},
                          items)
    assert {t["id"]: t["count"] for t in renamed["themes"]} == {t["id"]: t["count"] for t in doc["themes"]}
    assert renamed["breakdowns"] == doc["breakdowns"]


def _with_copies(items: list[dict[str, Any]], rng: random.Random) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """``items`` with copies of three answers appended (11 exact, 3 near: case and punctuation), each copy with its
    own plan, rating and score; copy id -> first copy's id."""
    out, first_of = [dict(it) for it in items], {}
    for n, (source, exact, near) in enumerate([(items[0], 8, 2), (items[40], 2, 0), (items[75], 1, 1)]):
        for j, text in enumerate([source["text"]] * exact + [source["text"].upper() + "!!"] * near):
            out.append({"id": f"copy-{n}-{j}", "text": text})
            first_of[f"copy-{n}-{j}"] = str(source["id"])
    for it in out:
        it["metadata"] = {"plan": rng.choice(["pro", "free"]), "stars": rng.randint(1, 5), "nps": rng.randint(0, 10)}
    return out, first_of


def test_copies_of_an_answer_count_as_respondents_with_their_first_copys_themes_and_their_own_rating() -> None:
    # Forty people answering "Good" are forty respondents. Copies were unusable, so a theme's count, share,
    # breakdown cells and impact left them out. Now a copy counts with its first copy's coding everywhere a
    # theme is counted, is never clustered or quoted, and keeps its own metadata and rating.
    base, _ = feedback(per_theme=20, seed=4)
    items, first_of = _with_copies(base, random.Random(9))
    params: dict[str, Any] = {"breakdown_by": ["plan"], "score": {"key": "nps", "scale": "nps"},
                              "sentiment_from": {"key": "stars", "scale": "1-5"},
                              "seed_themes": [{"name": "Late delivery", "description": "the order arrived late"},
                                              {"name": "Prices", "description": "too expensive, price, fees"}]}
    doc = _run(items, **params)
    before = _run(items, count_duplicates=False, **params)
    by_id = {str(a["response_id"]): a for a in doc["assignments"]}
    stars = {str(it["id"]): it["metadata"]["stars"] for it in items}
    for rid, fid in first_of.items():
        a, first = by_id[rid], by_id[fid]
        assert a["duplicate_of"] == first["response_id"] and a["reason"] in ("exact_duplicate", "near_duplicate")
        assert (a["bucket"], a["themes"], a.get("broad"), a.get("fine")) == \
            (first["bucket"], first["themes"], first.get("broad"), first.get("fine"))
        assert a["sentiment"] == S.from_rating(stars[rid], S.declared_scale("1-5")).to_json()  # its own rating
        assert next(x for x in before["assignments"] if str(x["response_id"]) == rid)["bucket"] == "unusable"
    counts, old = doc["run"]["counts"], before["run"]["counts"]
    copies = len(first_of)
    assert counts["duplicates"] == copies and old["duplicates"] == 0
    assert counts["usable"] == old["usable"] + copies and counts["responses"] == old["responses"]
    assert counts["unusable"]["exact_duplicate"] == counts["unusable"]["near_duplicate"] == 0
    assert old["unusable"]["exact_duplicate"] + old["unusable"]["near_duplicate"] == copies
    assert counts["themed"] + counts["other"] == counts["usable"]
    # The clustering is the one without copies: same themes, labels and quotes; only counts grow (and with them
    # the ids, which go by the count shown: document.number_by_count).
    assert sorted((t["label"], str(t["quotes"])) for t in doc["themes"]) == \
        sorted((t["label"], str(t["quotes"])) for t in before["themes"])
    assert [t["id"] for t in doc["themes"]] == [f"t{n}" for n in range(1, len(doc["themes"]) + 1)]
    renamed_to = {t["label"]: t["id"] for t in doc["themes"]}
    grown = Counter(r["theme_id"] for rid in first_of for r in by_id[rid]["themes"])
    assert sum(grown.values()) > 0
    old_count = {renamed_to[t["label"]]: t["count"] for t in before["themes"]}
    n_scored = sum(1 for a in doc["assignments"] if a["bucket"] != "unusable")
    for t in doc["themes"]:
        assert t["count"] == old_count[t["id"]] + grown[t["id"]], t["id"]
        assert t["share"] == round(t["count"] / counts["usable"], 4)
        s = t["sentiment"]
        assert s["positive"] + s["neutral"] + s["negative"] == t["count"]
        cells = [c["count"] for g in doc["breakdowns"][0]["groups"] for c in g["themes"] if c["theme_id"] == t["id"]]
        assert sum(cells) == t["count"], (t["id"], cells)
        assert not {str(q["response_id"]) for q in t["quotes"]} & set(first_of)
    assert doc["impact"]["n"] == n_scored == counts["usable"]
    for code in doc["seed_themes"]:  # the codebook's counts too
        having = sum(1 for a in doc["assignments"] if code["name"] in [c["name"] for c in a.get("seed_codes") or []])
        assert code["count"] == having > 0 and code["share"] == round(having / counts["usable"], 4), code
    assert doc["sentiment"]["scored"] == counts["usable"]
    assert doc["instrument"]["n"] == counts["usable"]
    assert sum(c["count"] for c in doc["instrument"]["codes"]) <= counts["usable"]
    # An edit recounts from the assignments: copies stay counted.
    renamed = edit_result(doc, {"edits": [{"op": "rename", "theme": doc["themes"][0]["id"], "label": "Renamed"}]},
                          items)
    assert {t["id"]: t["count"] for t in renamed["themes"]} == {t["id"]: t["count"] for t in doc["themes"]}
    # A later wave coded on this one's instrument: a copy in it follows its first copy, and "then" counts them.
    second, first2 = _with_copies([{**it, "id": 1000 + int(it["id"])} for it in base], random.Random(11))
    wave2 = _run({"responses": second, "baseline": baseline_of(EARLIER, doc)}, compare_to=EARLIER)
    by2 = {str(a["response_id"]): a for a in wave2["assignments"]}
    assert all(by2[r]["themes"] == by2[f]["themes"] and by2[r]["bucket"] == by2[f]["bucket"] for r, f in first2.items())
    comparison = wave2["comparison"]
    assert comparison["n_then"] == counts["usable"] and comparison["n_now"] == wave2["run"]["counts"]["usable"]
    assert comparison["copies"] is True
    assert sum(t["count"] for t in wave2["themes"]) == sum(len(a["themes"]) for a in wave2["assignments"])
    # Against a wave that did not count copies (before schema 1.4; here count_duplicates=false), "now" leaves its
    # copies out too, so both shares are of distinct answers: 14 copies would otherwise move one theme alone.
    mixed = _run({"responses": second, "baseline": baseline_of(EARLIER, before)}, compare_to=EARLIER)
    cmp = mixed["comparison"]
    distinct = [a for a in mixed["assignments"] if a["bucket"] != "unusable" and a.get("duplicate_of") is None]
    assert cmp["copies"] is False and cmp["n_then"] == old["usable"]
    assert cmp["n_now"] == len(distinct) == mixed["run"]["counts"]["usable"] - mixed["run"]["counts"]["duplicates"]
    having = Counter(r["theme_id"] for a in distinct for r in a["themes"])
    assert {r["theme_id"]: r["count_now"] for r in cmp["themes"]} == \
        {r["theme_id"]: having.get(r["theme_id"], 0) for r in cmp["themes"]}
    assert any(t["count"] > having[t["id"]] for t in mixed["themes"])  # the themes themselves still count them
    for d in (doc, wave2, mixed, renamed):  # run.counts agree with the buckets, after a wave's recoding too
        buckets = Counter(a["bucket"] for a in d["assignments"])
        assert (d["run"]["counts"]["themed"], d["run"]["counts"]["other"]) == (buckets["theme"], buckets["other"])
    deleted = edit_result(doc, {"edits": [{"op": "delete", "theme": doc["themes"][0]["id"]}]}, items)
    assert deleted["run"]["counts"]["other"] == counts["other"] + doc["themes"][0]["count"] == \
        sum(a["bucket"] == "other" for a in deleted["assignments"])
    said = "distinct answers: the earlier wave did not count copies of an answer"
    assert said in render_md(mixed)[1].decode() and said not in render_md(wave2)[1].decode()


def test_csv_strings_rate_sentiment_orders_are_numbers_and_a_tiny_missing_group_is_small() -> None:
    # stats44 through the pipeline. A CSV's cells are strings (the CLI sends them so): sentiment_from reads "1" and
    # "5" as params.score does (it was a 422). "orders" 0-10 is quartile ranges, not NPS groups (it made every
    # customer with six orders or fewer a "detractor"). Two answers without a plan are a (missing) group of 2:
    # small_n, never significant, whatever its shares.
    items, _ = feedback(per_theme=25, seed=5)
    rng = random.Random(2)
    for i, it in enumerate(items):
        it["metadata"] = {"stars": "1" if i % 2 else "5", "orders": rng.randint(0, 10),
                          **({"plan": rng.choice(["pro", "free"])} if i >= 2 else {})}
    doc = _run(items, sentiment_from="stars", score={"key": "stars", "scale": "csat"}, breakdown_by=["orders", "plan"])
    assert doc["sentiment"]["scale"] == "stars" and doc["sentiment"]["scored"] == doc["run"]["counts"]["usable"]
    by_id = {str(it["id"]): it["metadata"]["stars"] for it in items}
    for a in doc["assignments"]:
        if a["bucket"] != "unusable":
            assert a["sentiment"]["label"] == ("negative" if by_id[str(a["response_id"])] == "1" else "positive")
    by_field = {b["field"]: b for b in doc["breakdowns"]}
    assert by_field["orders"]["kind"] == "numeric"
    assert not {"detractor", "passive", "promoter"} & {g["value"] for g in by_field["orders"]["groups"]}
    missing = next(g for g in by_field["plan"]["groups"] if g["value"] == "(missing)")
    assert missing["n"] <= 2 and missing["small_n"] and all(c["q"] is None and not c["significant"]
                                                            for c in missing["themes"])
    assert by_field["plan"]["testing"]["min_n"] == 10
    assert doc["impact"]["single_label"] is True and doc["impact"]["note"]
    assert doc["schema_version"] == "1.7"


def test_multi_label_broad_theme_counts_are_what_the_theme_filter_finds() -> None:
    # The bundled sample, multi_label: 16 themes under 8 broad themes, 14 responses with themes under two of them.
    # A broad theme's count was its responses' primary themes' only, and theme=p1 on the responses route (which
    # lists a response with any theme in p1) found more: the two now agree, and so do the CSV's rows.
    import csv as csv_module

    from pipelines.thematic.render import render_csv
    from pipelines.thematic.verbatims import page
    from shared.sdk import ResponseQuery

    with open("samples/feedback.csv", newline="", encoding="utf-8") as f:
        items = [{"id": r["id"], "text": r["text"]} for r in csv_module.DictReader(f)]
    doc = _run(items, multi_label=True, min_theme_size=3)
    assert doc["levels"]["broad"] == "parents"
    parent_of = {t["id"]: t["parent"] for t in doc["themes"]}
    assert any(len({parent_of[r["theme_id"]] for r in a["themes"]}) > 1 for a in doc["assignments"]), \
        "no response with themes under two broad themes: the test would prove nothing"
    rows = list(csv_module.DictReader(render_csv(doc, items)[1].decode().splitlines()))
    for p in doc["parents"]:
        assert page(doc, items, ResponseQuery({"theme": p["id"]}, {}, 0, 1)).total == p["count"], p["id"]
        assert len({r["response_id"] for r in rows if parent_of.get(r["theme_id"]) == p["id"]}) == p["count"]
