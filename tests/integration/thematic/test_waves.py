"""Issue 23, waves on one instrument, through the whole pipeline (real embedded model, fake platform context)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest

from pipelines.thematic import insight
from pipelines.thematic import keywords as K
from pipelines.thematic import waves as W
from pipelines.thematic.baseline import baseline_of
from pipelines.thematic.edit import edit_result

from .test_insight_pipeline import EARLIER, _majority, _run, _wave


def _holding(doc: dict[str, Any], truth: dict[str, str], theme: str, share: float = 0.2) -> set[str]:
    """Themes of ``doc`` that hold the planted ``theme``: at least ``share`` of their answers are of it."""
    votes: dict[str, Counter[str]] = {}
    for a in doc["assignments"]:
        if a["themes"]:
            votes.setdefault(a["themes"][0]["theme_id"], Counter())[truth[str(a["response_id"])]] += 1
    return {t for t, c in votes.items() if c[theme] >= share * sum(c.values())}


def _truth(*waves: tuple[list[dict[str, Any]], list[str]]) -> dict[str, str]:
    return {str(it["id"]): t for items, truth in waves for it, t in zip(items, truth, strict=True)}


def test_an_unchanged_wave_flags_nothing_and_a_theme_that_was_never_there_is_new_and_untested() -> None:
    first = _wave({"delivery": 25, "price": 25, "staff": 25}, seed=1)
    wave1 = _run(first[0])
    inst = wave1["instrument"]
    assert [c["theme_id"] for c in inst["codes"]] == [t["id"] for t in wave1["themes"]]
    assert sum(c["count"] for c in inst["codes"]) <= inst["n"] == wave1["run"]["counts"]["usable"]
    # Same mix again (other texts): one instrument codes both waves, so nothing changes and nothing is new.
    same = _wave({"delivery": 25, "price": 25, "staff": 25}, seed=2, offset=1000)
    flat = _run({"responses": same[0], "baseline": baseline_of(EARLIER, wave1)}, compare_to=EARLIER)
    cmp = flat["comparison"]
    assert cmp["mode"] == "inherit" and cmp["instrument"] == "centroids"
    assert cmp["new"] == [] and not any(r["significant"] for r in cmp["themes"]), cmp["themes"]
    assert {t["id"] for t in flat["themes"]} <= set(cmp["then"])
    # The app theme did not exist in wave 1: its answers are far from every earlier theme, it is new, it is
    # not tested (no share of 0 to test against), and the wave-1 themes keep their ids.
    grown = _wave({"delivery": 25, "price": 25, "staff": 25, "app": 25}, seed=3, offset=2000)
    doc = _run({"responses": grown[0], "baseline": baseline_of(EARLIER, wave1)}, compare_to=EARLIER)
    cmp = doc["comparison"]
    major = _majority(doc, _truth(grown))
    assert cmp["new"] and all(major[t] == "app" for t in cmp["new"]), (cmp["new"], major)
    for r in cmp["themes"]:
        if r["status"] == "new":
            assert r["p"] is None and r["q"] is None and r["change"] is None and not r["significant"]
    app = sum(1 for a in doc["assignments"] if a["themes"] and a["themes"][0]["theme_id"] in cmp["new"])
    assert app >= 20
    # The next wave inherits wave 1's centroids unchanged and one per new theme.
    codes = doc["instrument"]["codes"]
    assert [c["centroid"] for c in codes[: len(inst["codes"])]] == [c["centroid"] for c in inst["codes"]]
    assert {c["theme_id"] for c in codes[len(inst["codes"]):]} == set(cmp["new"])


def test_both_planted_changes_are_found_and_the_discover_mode_stays_available() -> None:
    first = _wave({"delivery": 30, "price": 30, "app": 30, "staff": 30}, seed=4)
    # Four themes, as planted: the test is of the comparison, not of the theme count.
    wave1 = _run(first[0], num_themes=4)
    truth1 = _truth(first)
    down, up = _holding(wave1, truth1, "delivery"), _holding(wave1, truth1, "price")
    second = _wave({"delivery": 6, "price": 60, "app": 30, "staff": 30}, seed=5, offset=1000)
    doc = _run({"responses": second[0], "baseline": baseline_of(EARLIER, wave1)}, compare_to=EARLIER)
    cmp = doc["comparison"]
    sig = [r for r in cmp["themes"] if r["significant"]]
    # -80 % delivery and x2 price: a theme holding each moves significantly that way, and nothing else does.
    assert any(r["theme_id"] in down and r["change"] < 0 for r in sig), cmp["themes"]
    assert any(r["theme_id"] in up and r["change"] > 0 for r in sig), cmp["themes"]
    assert all(r["theme_id"] in down | up for r in sig), (sig, down, up)
    assert cmp["new"] == []
    old = _run({"responses": second[0], "baseline": baseline_of(EARLIER, wave1)}, compare_to=EARLIER,
               compare_mode="discover")
    assert old["comparison"]["mode"] == "discover" and old["comparison"]["instrument"] == "prototypes"


def test_a_merge_in_the_earlier_wave_moves_its_instrument_and_an_old_result_falls_back_to_prototypes() -> None:
    first = _wave({"delivery": 25, "price": 25, "staff": 25}, seed=6)
    wave1 = _run(first[0])
    major1 = _majority(wave1, _truth(first))
    a, b = wave1["themes"][0]["id"], wave1["themes"][1]["id"]
    merged = edit_result(wave1, {"edits": [{"op": "merge", "themes": [a, b], "label": "Both"}]}, first[0])
    codes = merged["instrument"]["codes"]
    assert {c["theme_id"] for c in codes} == {t["id"] for t in merged["themes"]} and b not in {c["theme_id"] for c in codes}
    assert W.counts(merged["instrument"])[a] == W.counts(wave1["instrument"])[a] + W.counts(wave1["instrument"])[b]
    second = _wave({"delivery": 25, "price": 25, "staff": 25}, seed=7, offset=1000)
    doc = _run({"responses": second[0], "baseline": baseline_of(EARLIER, merged)}, compare_to=EARLIER)
    ids = {t["id"] for t in doc["themes"]}
    assert b not in ids and a in ids and doc["comparison"]["new"] == []
    assert doc["comparison"]["then"][a]["count"] == W.counts(merged["instrument"])[a]
    # A deleted theme's centroid codes to no theme, in the next wave as in this one.
    gone = next(t["id"] for t in merged["themes"] if t["id"] != a)
    deleted = edit_result(merged, {"edits": [{"op": "delete", "theme": gone}]}, first[0])
    assert [c["theme_id"] for c in deleted["instrument"]["codes"]].count(None) >= 1
    doc = _run({"responses": second[0], "baseline": baseline_of(EARLIER, deleted)}, compare_to=EARLIER)
    assert gone not in {t["id"] for t in doc["themes"]} and doc["comparison"]["new"] == []
    # A result written before schema 1.2 has no instrument: its prototypes stand in, and the result says so.
    older = {k: v for k, v in wave1.items() if k != "instrument"}
    doc = _run({"responses": second[0], "baseline": baseline_of(EARLIER, older)}, compare_to=EARLIER)
    assert doc["comparison"]["instrument"] == "prototypes"
    assert set(major1.values()) >= {"delivery", "price", "staff"}


def test_centroids_round_trip_through_float16_and_far_is_below_every_radius() -> None:
    rng = np.random.default_rng(0)
    v = rng.normal(size=384).astype(np.float32)
    v /= np.linalg.norm(v)
    assert np.abs(W.unpack(W.pack(v)) - v).max() < 1e-3
    # Two earlier themes on two axes; a response on a third axis is far from both, one near the first is not.
    e = np.eye(4, dtype=np.float32)
    inst = {"floor": 0.3, "codes": [
        {"theme_id": "t1", "centroid": W.pack(e[0]), "radius": 0.6, "count": 0, "splits": []},
        {"theme_id": "t2", "centroid": W.pack(e[1]), "radius": 0.6, "count": 0, "splits": [
            {"keyword": "refund", "theme_id": "t3", "count": 0}]}]}
    emb = np.stack([e[2]] * 12 + [0.9 * e[0] + 0.1 * e[2], 0.8 * e[1] + 0.2 * e[3]]).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    texts = ["x"] * 12 + ["a", "my refund"]
    coded, facts = W.inherit(emb, texts, ["d1"] * 12 + ["d2", "d2"], inst, min_size=5)
    assert facts == {"far": 12, "new_discovered": ["d1"]}
    assert coded == [None] * 12 + ["t1", "t3"]  # the split's keyword rule applies to the next wave too
    # With fewer far answers than min_theme_size (or NEW_MIN_FAR) the cluster is not new; its answers get no
    # earlier theme (they are below the floor of every one).
    coded, facts = W.inherit(emb, texts, ["d1"] * 12 + ["d2", "d2"], inst, min_size=13)
    assert facts["new_discovered"] == [] and coded[:12] == [""] * 12
    coded, facts = W.inherit(emb[3:], texts[3:], (["d1"] * 12 + ["d2", "d2"])[3:], inst, min_size=5)
    assert facts["new_discovered"] == [] and W.NEW_MIN_FAR == 10


def _code(theme_id: str, v: list[float]) -> dict[str, Any]:
    u = np.asarray(v, dtype=np.float32)
    return {"theme_id": theme_id, "centroid": W.pack(u / np.linalg.norm(u)), "radius": 0.5, "count": 0, "splits": []}


def test_near_earlier_themes_form_one_family_and_far_ones_stay_alone() -> None:
    # t1/t2 at cosine 0.96 (one intent cut in two), t3 orthogonal, t4 a merged theme with two codes near t3.
    codes = [_code("t1", [1, 0.1, 0]), _code("t2", [1, 0.4, 0]), _code("t3", [0, 0, 1]),
             _code("t4", [0, 0.3, 1]), _code("t4", [0.2, 0, 1]), {**_code("t9", [1, 0, 0]), "theme_id": None}]
    fam = W.families(codes, threshold=0.9)
    assert fam == {"t1": "t1", "t2": "t1", "t3": "t3", "t4": "t3"}
    # Below the threshold nothing joins: the same themes, each alone.
    assert W.families(codes, threshold=0.999) == {"t1": "t1", "t2": "t2", "t3": "t3", "t4": "t4"}


def test_a_family_is_tested_pooled_against_hand_computed_values() -> None:
    # t1+t2 pooled: 30 of 1000 then, 70 of 1000 now; z = 0.04 / sqrt(0.05 * 0.95 * 0.002) = 4.104, p = 4.06e-5.
    then, now = {"t1": 20, "t2": 10, "t3": 100}, {"t1": 40, "t2": 30, "t3": 100}
    rows = W.family_tests(then, 1000, now, 1000, {"t1": "t1", "t2": "t1", "t3": "t3"})
    assert len(rows) == 1  # a family of one theme is its theme's own test, not repeated
    (r,) = rows
    assert r["theme_ids"] == ["t1", "t2"] and (r["count_then"], r["count_now"]) == (30, 70)
    assert r["change"] == 0.04 and abs(r["p"] - 4.06e-5) < 1e-6 and r["q"] < 1e-3 and r["significant"]


@pytest.mark.parametrize("concentration", [5.0, 1.0])
def test_theme_and_family_tests_keep_their_level_on_null_waves(concentration: float) -> None:
    # 30 earlier themes in 10 families of 3; both waves drawn from one distribution, 400 seeds: the share of
    # seeds with any significant theme, and with any significant family, stays near alpha, here <= 8 %. Under
    # plain BH (the default) as under the weighted BH (weights from the pooled counts); with concentration 1 the
    # themes' sizes are spread (0 to about 200 of 1,200 answers), so the weights are far from 1.
    rng = np.random.default_rng(0)
    ids = [f"t{i}" for i in range(30)]
    fam = {t: ids[3 * (i // 3)] for i, t in enumerate(ids)}
    p = rng.dirichlet(np.full(30, concentration))
    hits = {"themes": 0, "families": 0, "themes, plain BH": 0, "families, plain BH": 0}
    spread = []
    for _ in range(400):
        a, b = rng.multinomial(1200, p), rng.multinomial(1190, p)
        then, now = dict(zip(ids, map(int, a), strict=True)), dict(zip(ids, map(int, b), strict=True))
        for weighted, tag in ((True, ""), (False, ", plain BH")):
            cmp = insight.compare(then, 1200, now, 1190, weighted=weighted)
            rows = W.family_tests(then, 1200, now, 1190, fam, weighted=weighted)
            hits["themes" + tag] += any(r["significant"] for r in cmp["themes"])
            hits["families" + tag] += any(r["significant"] for r in rows)
            if weighted:
                w = [r["weight"] for r in cmp["themes"] if r["weight"] > 0]
                spread.append(max(w) / min(w))
    assert all(h / 400 <= 0.08 for h in hits.values()), hits
    if concentration == 1.0:
        assert float(np.median(spread)) > 100  # the weights really differ: this is not plain BH again


def test_weights_from_the_pooled_counts_find_a_doubled_large_theme_that_plain_bh_misses() -> None:
    # 20 unchanged earlier themes of 30 answers and one that grows from 60 to 95, of 1,200 in each wave.
    # Its test: shares 0.05 and 0.079167, pooled 155 / 2400 = 0.064583, se = sqrt(0.064583 * 0.935417 * 2 / 1200)
    # = 0.010034, z = 0.029167 / 0.010034 = 2.9067, p = 0.003653. Plain BH over 21 themes: q = 0.003653 * 21 =
    # 0.0767, not significant. Weighted: w = 21 * 155^2 / (155^2 + 20 * 60^2) = 504525 / 96025 = 5.2541, q =
    # 0.003653 / 5.2541 * 21 = 0.0146, significant; the unchanged themes have p = 1 either way.
    then = {f"t{i}": 30 for i in range(20)} | {"big": 60}
    now = {f"t{i}": 30 for i in range(20)} | {"big": 95}
    plain = {r["theme_id"]: r for r in insight.compare(then, 1200, now, 1200, weighted=False)["themes"]}
    weighted = {r["theme_id"]: r for r in insight.compare(then, 1200, now, 1200, weighted=True)["themes"]}
    assert plain["big"]["p"] == weighted["big"]["p"] == pytest.approx(0.003653, abs=1e-6)
    assert plain["big"]["q"] == pytest.approx(0.0767, abs=1e-4) and not plain["big"]["significant"]
    assert weighted["big"]["weight"] == pytest.approx(5.2541, abs=1e-4)
    assert weighted["big"]["q"] == pytest.approx(0.0146, abs=1e-4) and weighted["big"]["significant"]
    assert not any(r["significant"] for t, r in weighted.items() if t != "big")


def _unsaid(doc: dict[str, Any], items: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Per earlier theme coded in ``doc``: its keywords and key phrases that none of its members' texts holds, as
    the describe stage reads a text (``keywords.terms`` for a keyword, ``keywords.phrases`` for a phrase's key)."""
    text = {str(it["id"]): it["text"] for it in items}
    members: dict[str, list[str]] = {}
    for a in doc["assignments"]:
        if a["themes"]:
            members.setdefault(a["themes"][0]["theme_id"], []).append(text[str(a["response_id"])])
    out: dict[str, list[str]] = {}
    for t in doc["themes"]:
        if t["id"] not in doc["comparison"]["then"]:
            continue  # a new theme: described by its run, as any theme is
        said = [K.terms(x) for x in members[t["id"]]]
        keys = [K.phrases(x) for x in members[t["id"]]]
        out[t["id"]] = [*(k for k in t["keywords"] if not any(k in s for s in said)),
                        *(p for p in t["key_phrases"] if not any(K.phrase_key(p) in s for s in keys))]
    return out


@pytest.mark.parametrize("mode", ["inherit", "discover"])
def test_an_earlier_theme_shows_only_words_its_own_answers_in_this_wave_say(mode: str) -> None:
    """A theme of the earlier codebook coded in this wave shows keywords and key phrases of its own members here,
    none they do not say. Before (2026-12-08) it took those of the discovered theme most of its members came from:
    with delivery down to 6 answers, clustered in with the price answers, "delivery" showed the price keywords."""
    first = _wave({"delivery": 30, "price": 30, "app": 30, "staff": 30}, seed=4)
    wave1 = _run(first[0], num_themes=4)
    second = _wave({"delivery": 6, "price": 60, "app": 30, "staff": 30}, seed=5, offset=1000)
    doc = _run({"responses": second[0], "baseline": baseline_of(EARLIER, wave1)}, compare_to=EARLIER,
               compare_mode=mode)
    unsaid = _unsaid(doc, second[0])
    assert unsaid and all(t["keywords"] for t in doc["themes"] if t["id"] in unsaid)
    assert not any(unsaid.values()), unsaid
    # The name and description are the earlier codebook's: the instrument.
    then = {t["id"]: t for t in wave1["themes"]}
    assert all((t["label"], t["description"]) == (then[t["id"]]["label"], then[t["id"]]["description"])
               for t in doc["themes"] if t["id"] in unsaid)
