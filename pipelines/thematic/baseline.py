"""Wave over wave (``params.compare_to``): the earlier job's codebook is carried into this job.

At submission ``baseline_of`` reduces the earlier job's current result (the researcher's edits included) to
what this job needs: per theme its id, name, description, keywords, a few member texts and its count, the
number of usable responses, and the earlier job's instrument (``waves.py``) when it has one. The platform
stores it with the input, so the worker never reads another job.

The default (``compare_mode="inherit"``, ``waves.inherit``) codes this wave with the earlier instrument and
calls a theme new only when its members are far from every earlier theme. ``compare_mode="discover"`` is the
behaviour before issue 23, kept as an option: themes are discovered afresh; then each discovered theme whose
members are mostly nearest one or a few earlier themes' prototypes (the mean embedding of "name: description"
and the example texts, at least ``SEED_FLOOR`` similar) is known, and its members are coded to the nearest of
those earlier themes (``match``); the others are new. Either way ``carry_over`` recodes the result: an
earlier theme keeps its id, name and description, so renames and merges survive the next wave; its keywords
and key phrases are this wave's, from its members' texts here (``own_words``, the describe stage's c-TF-IDF
and key phrases against this wave's other themes); new themes get fresh ids; earlier themes that no response is
coded to are gone.

Caveat of ``discover``: "then" counts come from the earlier run's clustering, "now" counts of known themes
from nearest-prototype coding; for loose themes a part of the change is the instrument's (issue 23 measured
false alarms from it). ``inherit`` counts both waves with one coder.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, NamedTuple

import numpy as np
from numpy.typing import NDArray

from . import waves
from .assign import SEED_FLOOR
from .embed import TextEmbedder
from .result import AssignmentOut, Choice, Counts, Levels, Quote, ThematicResult, Theme, ThemeRef

#: A discovered theme is the earlier theme that most of its members are nearest, if that is at least this share.
MAJORITY: Final = 0.5
#: An earlier theme takes part in coding a discovered theme when it is nearest for at least this share of it.
PART: Final = 0.2
#: Member texts kept per earlier theme for its prototype: enough to average out one odd quote.
PROTOTYPE_TEXTS: Final = 5


def baseline_of(job_id: str, result: Mapping[str, Any]) -> dict[str, Any]:
    """What this job needs of the earlier job's result (small: ~1 KB per theme, twice that with its instrument)."""
    counts = result.get("run", {}).get("counts", {})
    usable = int(counts.get("usable") or sum(1 for a in result.get("assignments", []) if a.get("bucket") != "unusable"))
    return {
        **({"instrument": result["instrument"]} if result.get("instrument") else {}),
        "job_id": job_id,
        "n": usable,
        # Whether its counts include copies of an answer (schema 1.4, count_duplicates): a comparison counts copies
        # only when both waves do.
        "copies": counts.get("duplicates") is not None and result.get("run", {}).get("params", {}).get(
            "count_duplicates", True) is True,
        "themes": [
            {
                "id": str(t["id"]),
                "label": str(t["label"]),
                "description": str(t.get("description", "")),
                "keywords": [str(k) for k in t.get("keywords", [])][:10],
                "count": int(t.get("count", 0)),
                "texts": [str(q["text"]) for q in t.get("quotes", [])][:PROTOTYPE_TEXTS],
            }
            for t in result.get("themes", [])
        ],
    }


def prototypes(baseline: Mapping[str, Any], embedder: TextEmbedder) -> NDArray[np.float32]:
    """One unit vector per earlier theme: the mean of its "name: description" and its example texts."""
    themes = baseline["themes"]
    texts: list[str] = []
    owner: list[int] = []
    for j, t in enumerate(themes):
        for text in [f"{t['label']}: {t['description']}".strip(": "), *t["texts"]]:
            texts.append(text)
            owner.append(j)
    vecs = embedder.embed(texts)
    out = np.zeros((len(themes), vecs.shape[1]), dtype=np.float32)
    np.add.at(out, np.array(owner), vecs)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    unit: NDArray[np.float32] = (out / np.maximum(norms, 1e-12)).astype(np.float32)
    return unit


def match(
    emb: NDArray[np.float32], primary: Sequence[str | None], protos: NDArray[np.float32], earlier_ids: Sequence[str],
    *, floor: float = SEED_FLOOR, majority: float = MAJORITY, part: float = PART,
) -> list[str | None]:
    """Per usable response, the earlier theme it is coded to, or None (it stays in its discovered theme).

    A discovered theme is known when at least ``majority`` of its members are nearest an earlier theme
    that holds at least ``part`` of its members (above ``floor``): one earlier theme (the same theme again),
    several (this wave's clustering is coarser than the last; its members go back to the earlier grain), or
    it is new. Members of a known theme are coded to the nearest of its earlier themes.
    """
    out: list[str | None] = [None] * len(primary)
    if len(earlier_ids) == 0 or emb.shape[0] == 0:
        return out
    sims = emb @ protos.T
    nearest = sims.argmax(axis=1)
    best = sims[np.arange(len(nearest)), nearest]
    members: dict[str, list[int]] = {}
    for i, t in enumerate(primary):
        if t is not None:
            members.setdefault(t, []).append(i)
    for rows in members.values():
        votes = Counter(int(nearest[i]) for i in rows if best[i] >= floor)
        chosen = [j for j, v in votes.items() if v >= part * len(rows)]
        if not chosen or sum(votes[j] for j in chosen) < majority * len(rows):
            continue  # a new theme
        cols = np.array(chosen)
        for i in rows:
            out[i] = earlier_ids[int(cols[int(sims[i, cols].argmax())])]
    return out


def _number(theme_id: str) -> int:
    m = re.fullmatch(r"t(\d+)", theme_id)
    return int(m.group(1)) if m else 0


class Words(NamedTuple):
    """What the describe stage says of one group of this wave's answers (``document.own_words``)."""

    keywords: list[str]
    key_phrases: list[str]
    #: The describe stage's sentence: an earlier theme's only when the earlier codebook has no description.
    description: str


#: Per group of response ids (this wave's themes after the recoding, each its primary members), its :class:`Words`,
#: each group scored against the others as the describe stage scores a job's themes.
OwnWords = Callable[[list[list[str]]], list[Words]]


class Carried(NamedTuple):
    """What :func:`carry_over` gives: the recoded result, and the earlier wave's part of its ``comparison``."""

    result: ThematicResult
    #: ``comparison`` as far as the earlier wave says it (job, n_then, then; rows empty): ``derive`` fills the rows
    #: from the recoded assignments, so it is handed on as it is, not validated half-built.
    comparison: dict[str, Any]


def carry_over(
    result: ThematicResult, coded: Mapping[str, str | None], baseline: Mapping[str, Any], quote_of: Mapping[str, str],
    *, own_words: OwnWords, then_counts: Mapping[str, int] | None = None,
    confidence: Mapping[str, float] | None = None,
) -> Carried:
    """Recode the result against the earlier codebook. ``coded`` maps a response id to an earlier theme id
    (the response moves there, themed even if this run called it other), to ``""`` (no theme: other), or to
    None (it stays in its discovered theme, which is new and gets a fresh id). An earlier theme keeps its id,
    name and description (the instrument); its keywords and key phrases are what its members say in this wave
    (``own_words`` over the recoded themes: :func:`_own_words`). Gives the ``comparison`` of the earlier wave too (its rows are filled by ``derive``),
    with "then" counts from ``then_counts`` (the earlier instrument's) or else the earlier themes' counts.

    Each part is built on the model (``with_``: a field keeps its place, a new one comes last), so every theme
    and assignment is validated where it is recoded, and the document is the one the dict rewrite of it wrote
    (``tests/unit/thematic/test_carry_over.py`` pins it).

    A compared job has one level of themes: the sub-themes and broad themes of this run's own clustering do
    not describe the earlier codebook's themes, so they are dropped rather than shown wrongly.
    """
    earlier = {t["id"]: t for t in baseline["themes"]}
    # A code naming no theme of the earlier codebook (cannot happen after codebook edits; a guard) is "other".
    coded = {k: ("" if v and v not in earlier else v) for k, v in coded.items()}
    usable = [a for a in result.assignments if a.bucket != "unusable"]
    themes, fresh = _recoded_themes(result.themes, usable, coded, earlier, quote_of)
    assignments = [a if a.bucket == "unusable" else _recoded(a, coded, fresh, confidence) for a in result.assignments]
    themes = _own_words(_recounted(themes, assignments), assignments, earlier, own_words)
    result = result.with_(
        themes=themes, assignments=assignments, parents=[], subthemes=[],
        levels=Levels(broad="themes", fine="themes", broad_count=len(themes), fine_count=len(themes)),
        run=result.run.with_(theme_count=_inherited_count(result.run.theme_count, themes, earlier, baseline),
                             counts=_bucket_counts(result.run.counts, assignments)),
    )
    then = {t["id"]: int(then_counts.get(t["id"], 0)) if then_counts is not None else int(t["count"])
            for t in baseline["themes"]}
    # Families of near earlier themes (waves.families), from the earlier instrument alone: tested pooled too.
    inst = baseline.get("instrument") if then_counts is not None else None
    family = waves.families(inst["codes"]) if inst and inst.get("codes") else {}
    sizes = Counter(family.values())
    comparison = {
        "job_id": baseline["job_id"], "n_then": int(baseline["n"]),
        "then": {t["id"]: {"label": t["label"], "count": then[t["id"]],
                           **({"family": family[t["id"]]} if sizes[family.get(t["id"], "")] > 1 else {})}
                 for t in baseline["themes"]},
        "themes": [], "new": [], "gone": [],
    }
    return Carried(result, comparison)


def _inherited_count(choice: Choice, themes: list[Theme], earlier: Mapping[str, Any],
                     baseline: Mapping[str, Any]) -> Choice:
    """``run.theme_count`` of a compared job. Its themes are the earlier job's codebook (and any new ones), not
    this wave's own clustering: kept as it was, the report said "16 themes in 8 groups; the data also support 11"
    with its confidence above a table of 29 themes. The count is fixed by the codebook (criterion ``fixed``, no
    confidence, which the renderers then leave out); this wave's own reading stays in the explanation."""
    new = sum(1 for t in themes if t.id not in earlier)
    k = len(themes)
    summary = (f"{k} theme{'s' if k != 1 else ''}: the compared job's codebook"
               + (f" and {new} new" if new else "") + f" (compare_to {baseline['job_id']}), so both waves are "
               "counted on one instrument.")
    own = choice.summary or choice.explanation
    return choice.with_(criterion="fixed", k=k, confidence=None, confidence_label=None, alternatives=[],
                        summary=summary, explanation=f"{summary} Why: the codebook fixes the count; this wave's own "
                                                     f"clustering (not shown) read: {own}")


def _own_words(themes: list[Theme], assignments: list[AssignmentOut], earlier: Mapping[str, Any],
               own_words: OwnWords) -> list[Theme]:
    """The earlier themes with this wave's keywords and key phrases: the describe stage's, of their members' texts
    here, scored against this wave's other themes (the new ones too). Taken from the discovered theme most of
    its members came from (until 2026-12-08), "Delivery way too slow" showed the ten keywords of "Prices", words
    none of its answers held; taken from the earlier wave (a theme coded only from this run's other), words
    perhaps none of this wave's answers hold. A new theme keeps the words its run gave it."""
    groups: dict[str, list[str]] = {}
    for a in assignments:
        if a.bucket == "theme" and a.themes:
            groups.setdefault(a.themes[0].theme_id, []).append(str(a.response_id))
    ids = [t.id for t in themes if t.id in groups]
    words = dict(zip(ids, own_words([groups[i] for i in ids]), strict=True))
    out = []
    for t in themes:
        w = words.get(t.id, Words([], [], "")) if t.id in earlier else None
        out.append(t if w is None else t.with_(keywords=w.keywords, key_phrases=w.key_phrases,
                                               description=t.description or w.description))
    return out


def _recoded_themes(
    discovered: list[Theme], usable: list[AssignmentOut], coded: Mapping[str, str | None],
    earlier: Mapping[str, Mapping[str, Any]], quote_of: Mapping[str, str],
) -> tuple[list[Theme], dict[str, str]]:
    """The earlier themes that got members (in order of their first member), then the discovered themes that
    kept some (under fresh ids); and the fresh id of each discovered theme kept."""
    old = {t.id: t for t in discovered}
    # Which discovered theme gave each earlier theme most of its members: the fields it is built on.
    sources: dict[str, Counter[str]] = {}
    members: dict[str, list[str | int]] = {}
    for a in usable:
        target = coded.get(str(a.response_id))
        if not target:
            continue
        if a.themes:
            sources.setdefault(target, Counter())[a.themes[0].theme_id] += 1
        members.setdefault(target, []).append(a.response_id)  # as given: an int id stays an int
    left = Counter(a.themes[0].theme_id for a in usable if a.themes and coded.get(str(a.response_id)) is None)
    next_id = max([_number(i) for i in earlier] + [0]) + 1
    fresh: dict[str, str] = {}
    for t in discovered:
        if left.get(t.id):
            fresh[t.id] = f"t{next_id}"
            next_id += 1
    themes = [_earlier_theme(earlier[target], ids, old, sources.get(target), quote_of)
              for target, ids in members.items()]
    for tid, new_id in fresh.items():
        themes.append(old[tid].with_(id=new_id, subthemes=[], parent=None, merged_from=[]))
    return themes, fresh


def _earlier_theme(
    e: Mapping[str, Any], ids: list[str | int], old: Mapping[str, Theme], votes: Counter[str] | None,
    quote_of: Mapping[str, str],
) -> Theme:
    """Earlier theme ``e`` with members ``ids``: its id, name and description on the fields of the discovered
    theme most of them come from, and quotes (counts are filled by :func:`_recounted`, keywords and key phrases
    by :func:`_own_words`)."""
    mine = {str(rid) for rid in ids}

    def quotes_after(kept: list[Quote]) -> list[Quote]:
        # The source theme's own quotes (chosen near its centre) that stayed with this theme, then other members.
        quoted = {str(q.response_id) for q in kept}
        more = [Quote(response_id=rid, text=quote_of[str(rid)]) for rid in ids
                if str(rid) in quote_of and str(rid) not in quoted][: max(0, 5 - len(kept))]
        return kept + more

    if not votes:
        # Coded only from this run's "other": no source theme; keywords and phrases come from _own_words.
        return Theme(keywords=[], labelled_by="keywords", key_phrases=[],
                     quotes=quotes_after([]), id=e["id"], label=e["label"], description=e["description"] or "",
                     merged_from=[], subthemes=[], parent=None, count=0, share=0.0)
    src = old[votes.most_common(1)[0][0]]
    # The source theme's fields in its order, this theme's id, name and quotes in their places; its levels last.
    return src.without("subthemes", "merged_from", "parent").with_(
        id=e["id"], label=e["label"], description=e["description"] or "",
        quotes=quotes_after([q for q in src.quotes if str(q.response_id) in mine]),
        merged_from=[], subthemes=[], parent=None, count=0, share=0.0,
    )


def _recoded(
    a: AssignmentOut, coded: Mapping[str, str | None], fresh: Mapping[str, str], confidence: Mapping[str, float] | None,
) -> AssignmentOut:
    """A usable assignment pointed at its earlier theme, its discovered theme's fresh id, or other."""
    refs, rid = a.themes, str(a.response_id)
    target = coded.get(rid)
    if target == "" or (target is None and not refs):
        return a.with_(themes=[], bucket="other", broad=None, fine=None)
    if target is None:
        first = refs[0].with_(theme_id=fresh[refs[0].theme_id])
    else:
        conf = confidence.get(rid) if confidence is not None else None
        first = ThemeRef(theme_id=target,
                         confidence=round(float(conf), 4) if conf is not None else (refs[0].confidence if refs else 0.0))
    # A secondary theme (multi_label) follows its theme if that theme is still there as a new one.
    rest = [r.with_(theme_id=fresh[r.theme_id]) for r in refs[1:] if r.theme_id in fresh]
    return a.with_(themes=[first, *[r for r in rest if r.theme_id != first.theme_id]], bucket="theme",
                   broad=first.theme_id, fine=None)


def _bucket_counts(counts: Counts, assignments: list[AssignmentOut]) -> Counts:
    """``run.counts`` with ``themed`` and ``other`` from the recoded assignments: a response of this run's "other"
    coded to an earlier theme is themed now, and one coded to no earlier theme is other."""
    buckets = Counter(a.bucket for a in assignments)
    return counts.with_(themed=buckets["theme"], other=buckets["other"])


def _recounted(themes: list[Theme], assignments: list[AssignmentOut]) -> list[Theme]:
    """Counts and shares of every theme from the assignments (a response in each of its themes), largest first
    (as ``codebook._recount`` does on a stored document, after an edit)."""
    counts = Counter(r.theme_id for a in assignments for r in a.themes)
    usable = sum(1 for a in assignments if a.bucket != "unusable") or 1
    recounted = [t.with_(count=counts.get(t.id, 0), share=round(counts.get(t.id, 0) / usable, 4)) for t in themes]
    return sorted(recounted, key=lambda t: -t.count)
