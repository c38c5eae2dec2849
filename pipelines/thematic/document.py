"""The result, built from the run's state (``stages.RunState``) by the insight and render stages.

The result is built as the typed model (``result.ThematicResult``), each part validated where it is built: the
insight stage writes a ``SentimentInfo``, the assign stage ``SeedCode``s and ``SeedThemeOut``s, the render stage
the themes, levels, assignments and run info. What follows from the assignments (comparison rows, breakdowns,
theme sentiment, impact: ``derive.derived``) is computed from the document, because a codebook edit
(``edit.py``) re-derives a stored document with the same functions; the render stage validates each section it
gets back and adds it to the model. The recoding against an earlier wave (``baseline.carry_over``) works on the
model too: each recoded theme and assignment is a validated copy (``with_``). The model keeps the key order its
builders gave (``result._Model``), so the stored bytes are what they were when the run built a dict.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from shared.sdk import PermanentError

from . import baseline as earlier_wave
from . import codebook, derive, waves
from . import describe as describing
from . import sentiment as sentiments
from .assign import recentre
from .clean import REASONS
from .embed import ClientEmbedder
from .result import (
    SCHEMA_VERSION,
    AssignmentOut,
    Breakdown,
    Choice,
    Comparison,
    Counts,
    Impact,
    Instrument,
    Levels,
    LLMInfo,
    Merge,
    ParentTheme,
    Quote,
    RunInfo,
    Sentiment,
    SentimentInfo,
    SubTheme,
    ThematicResult,
    Theme,
    ThemeRef,
    ThemeSentiment,
)

if TYPE_CHECKING:
    from .stages import RunState

#: Bumped when a change alters what a run computes; part of every checkpoint's fingerprint.
PIPELINE_VERSION = "1.2.0"


@dataclass
class Recode:
    """How this wave is coded against the earlier one (``params.compare_to``): ``baseline.carry_over``'s input."""

    #: Response id → earlier theme id, "" (other) or None (stays in its new theme).
    coded: dict[str, str | None]
    #: The result's ``comparison`` fields besides the rows: mode, instrument and (inherit) far.
    facts: dict[str, Any]
    then_counts: dict[str, int] | None = None
    confidence: dict[str, float] | None = None
    #: The earlier instrument's codes this job's instrument inherits (inherit mode).
    inherited: list[dict[str, Any]] = field(default_factory=list)


def encoder_name(s: RunState) -> str:
    return f"{s.embedder.info.name}@{s.embedder.info.sha256}"


def primary_ids(s: RunState) -> list[str | None]:
    """Each usable response's primary theme id (None: other), as ``assignments[].themes[0]`` will say."""
    by_index = _themes_by_index(s)
    return [next((by_index[t].id for t, _ in a.themes if t in by_index), None) for a in s.assigned]


def _themes_by_index(s: RunState) -> dict[int, describing.ThemeInfo]:
    # Theme index (cluster label) → ThemeInfo; describe orders themes by size.
    return {int(s.labels[th.members[0]]): th for th in s.themes if th.members}


def number_by_count(s: RunState) -> None:
    """Number the themes (``t1``...), the broad themes above them (``p1``...) and each theme's sub-themes
    (``t1.1``...) by the count the result shows: every response coded to one (a secondary theme too, multi_label)
    with its counted copies (``count_duplicates``). The describe stage numbers them by their distinct members
    before the copies and the assignment are known, so without this a theme an answer's copies make larger was
    listed above themes with lower ids (t12 before t11). Ties keep the describe stage's order. Runs once the
    assign stage has coded every response, before anything reads an id (the recoding against an earlier wave,
    the result); the describe checkpoint keeps its numbering and a resumed run renumbers it the same way."""
    assert s.levels is not None
    levels, by_index = s.levels, _themes_by_index(s)
    weight = copy_weights(s) or [1] * len(s.assigned)
    counts: dict[str, int] = {}
    themes_by_id = {th.id: th for th in s.themes}
    for n, a in enumerate(s.assigned):
        ids = [by_index[t].id for t, _ in a.themes if t in by_index]
        for tid in ids:
            counts[tid] = counts.get(tid, 0) + weight[n]
        if not ids:
            continue
        broad, fine = describing.level_ids(levels, themes_by_id, ids[0], n)
        for lid in (broad if levels.broad == "parents" else None, fine if levels.fine == "subthemes" else None):
            if lid is not None:
                counts[lid] = counts.get(lid, 0) + weight[n]

    def ranked(items: list[describing.ThemeInfo]) -> list[str]:
        return [th.id for _, th in sorted(enumerate(items), key=lambda p: (-counts.get(p[1].id, 0), p[0]))]

    theme_id = {old: f"t{n}" for n, old in enumerate(ranked(s.themes), start=1)}
    parent_id = {old: f"p{n}" for n, old in enumerate(ranked(levels.parents), start=1)}
    sub_id: dict[str, str] = {}
    for old_parent in theme_id:
        mine = [sub for sub in levels.subthemes if sub.parent == old_parent]
        sub_id |= {old: f"{theme_id[old_parent]}.{n}" for n, old in enumerate(ranked(mine), start=1)}
    if all(k == v for m in (theme_id, parent_id, sub_id) for k, v in m.items()):
        return
    s.themes = [replace(th, id=theme_id[th.id], parent=parent_id.get(th.parent, th.parent) if th.parent else None)
                for th in s.themes]
    # The sub-themes in their new ids' order (a theme lists them so: themes[].subthemes), ``sub_of`` following.
    order = sorted(range(len(levels.subthemes)), key=lambda j: _id_key(sub_id.get(levels.subthemes[j].id, "")))
    moved = {old: new for new, old in enumerate(order)}
    s.levels = replace(
        levels,
        parents=[replace(p, id=parent_id[p.id]) for p in levels.parents],
        children={parent_id.get(k, k): [theme_id.get(c, c) for c in v] for k, v in levels.children.items()},
        subthemes=[replace(sub, id=sub_id.get(sub.id, sub.id), parent=theme_id.get(sub.parent, sub.parent)
                           if sub.parent else None) for sub in (levels.subthemes[j] for j in order)],
        sub_of=[moved[j] if j >= 0 else j for j in levels.sub_of],
    )
    s.merges = [{**m, "into": theme_id.get(m["into"], m["into"])} for m in s.merges]


def _id_key(tid: str) -> tuple[int, ...]:
    """``t2.10`` -> (2, 10): ids in their numbers' order."""
    return tuple(int(x) for x in tid.lstrip("tp").split(".") if x.isdigit())


# Insight --------------------------------------------------------------------------------------------------------


def insight_sentiment(s: RunState) -> tuple[SentimentInfo | None, list[sentiments.Scored | None] | None]:
    """The result's ``sentiment`` section and one score per usable response, then one per counted copy
    (``s.copies``; None: sentiment off). A copy has its own rating, and its first copy's score from the text."""
    p, usable = s.params, s.usable
    if p.sentiment_from is not None:
        metadata = _metadata(s)
        # Its own scale, or the one params.score declares for the same key (ThematicParams.sentiment_scale).
        key, declared = p.sentiment_from.key, p.sentiment_scale()
        values = [(metadata.get(str(r.id)) or {}).get(key) for r in [*usable, *(c for c, _ in s.copies)]]
        # A declared scale wins over what the values suggest (a 0-10 survey answered only 1-5 is not stars).
        scale = sentiments.rating_scale(values) if declared is None else sentiments.declared_scale(declared)
        if isinstance(scale, str) or (declared is not None and sentiments.declared_problems(values, declared)):
            # Checked at submission (validate.prepare); a guard only.
            raise PermanentError(f"sentiment_from={key!r}: {scale if isinstance(scale, str) else 'off its scale'}")
        scored = [sentiments.from_rating(v, scale) for v in values]
        info: dict[str, Any] = {"source": "metadata", "field": key, "model": None, "scale": scale.kind,
                                "rating_range": scale.range, "scale_from": "declared" if scale.declared else "inferred"}
    elif p.sentiment == "model" and sentiments.model_applies(s.embedder):
        # The vectors clustering used: no second embedding (sentiment_model.py).
        scored = list[sentiments.Scored | None](sentiments.by_model(s.emb))
        info = {"source": "model", "field": None, "model": sentiments.MODEL_NAME, "scale": None}
    elif p.sentiment in ("model", "lexicon"):
        scored = list[sentiments.Scored | None](sentiments.lexicon([r.text for r in usable]))
        info = {"source": "lexicon", "field": None, "model": sentiments.LEXICON_MODEL, "scale": None}
        if p.sentiment == "model":  # the default: say why the classifier did not score this job
            info["note"] = sentiments.model_fallback_note(s.embedder)
    elif p.sentiment == "llm":
        scored, info = _llm_sentiment(s)
    else:
        return None, None
    if p.sentiment_from is None:
        scored += [scored[first] for _, first in s.copies]
    return SentimentInfo.model_validate({**info, "scored": sum(1 for x in scored if x is not None)}), scored


def _llm_sentiment(s: RunState) -> tuple[list[sentiments.Scored | None], dict[str, Any]]:
    usable = s.usable
    got, note = s.llm_sentiment if s.llm_sentiment is not None else ({}, "no LLM client in this run")
    missing = [n for n in range(len(usable)) if str(n) not in got]
    # What the LLM did not label (budget spent, a bad batch) is scored by the lexicon, and the result says so.
    fill = dict(zip(missing, sentiments.lexicon([usable[n].text for n in missing]), strict=True))
    scored = [got.get(str(n)) or fill.get(n) for n in range(len(usable))]
    if missing:
        note = f"{note + '; ' if note else ''}{len(missing)} response(s) scored by {sentiments.LEXICON_MODEL}"
    if s.llm_disagreed:
        note = f"{note + '; ' if note else ''}{_disagreed_note(s)}"
    model = getattr(s.client, "model_name", None) if s.client else None
    return scored, {"source": "llm", "field": None, "model": model, "scale": None, "note": note}


def _disagreed_note(s: RunState) -> str:
    """What the LLM said where its score did not fit its label (label and score on one scale: the label counts)."""
    d = s.llm_disagreed
    neutral = sum(1 for _, label, _ in d if label == "neutral")
    parts = [f"{neutral} labelled neutral scored 0" if neutral else "",
             f"{len(d) - neutral} on the other side of 0 from their label scored +-0.5" if len(d) > neutral else ""]
    shown = ", ".join(f"response {s.usable[int(n)].id}: {label} at {score:+.2f}" for n, label, score in d[:3])
    return (f"the LLM's score did not fit its label for {len(d)} response(s), so the label counts and the score "
            f"follows it ({' and '.join(p for p in parts if p)}); the LLM said {shown}{', ...' if len(d) > 3 else ''}")


def compare_recode(s: RunState) -> Recode:
    """Code this wave against the earlier job (``s.baseline``): by its prototypes (discover) or its instrument."""
    assert s.baseline is not None
    baseline, emb = s.baseline, s.emb
    ids = [str(r.id) for r in s.usable]
    primary = primary_ids(s)
    if s.params.compare_mode == "discover":
        protos = earlier_wave.prototypes(baseline, s.embedder)
        coded = earlier_wave.match(emb, primary, protos, [t["id"] for t in baseline["themes"]])
        return _with_copies(s, Recode(dict(zip(ids, coded, strict=True)),
                                      {"mode": "discover", "instrument": "prototypes", "copies": _both_count_copies(s)}))
    encoder = encoder_name(s)
    earlier = baseline.get("instrument")
    how = "centroids"
    if not earlier or earlier.get("encoder") != encoder or not earlier.get("codes") or \
            len(waves.unpack(earlier["codes"][0]["centroid"])) != emb.shape[1]:
        # An earlier result without an instrument (before schema 1.2) or of another encoder: its themes'
        # prototypes stand in, and "then" is its clustering's counts (approximate, and the result says so).
        earlier = waves.from_prototypes(earlier_wave.prototypes(baseline, s.embedder), baseline, encoder)
        how = "prototypes"
    coded, facts = waves.inherit(emb, [r.text for r in s.usable], primary, earlier, min_size=s.params.min_theme_size,
                                 weights=copy_weights(s) if _both_count_copies(s) else None)
    # A response coded to an earlier theme gets its cosine to that theme's nearest centroid as the confidence.
    _, best, _ = waves.nearest(emb, np.stack([waves.unpack(c["centroid"]) for c in earlier["codes"]])
                               if earlier["codes"] else np.zeros((0, emb.shape[1]), dtype=np.float32))
    return _with_copies(s, Recode(
        dict(zip(ids, coded, strict=True)),
        {"mode": "inherit", "instrument": how, "far": facts["far"], "copies": _both_count_copies(s)},
        then_counts=waves.counts(earlier), confidence={i: float(b) for i, b in zip(ids, best, strict=True)},
        inherited=[dict(c) for c in earlier["codes"]]))


def _both_count_copies(s: RunState) -> bool:
    """Whether the comparison counts copies of an answer: only when the earlier wave did too (``baseline_of``; a
    result from before schema 1.4 did not). Else this wave's copies are left out of "now" and of the far count."""
    assert s.baseline is not None
    return bool(s.params.count_duplicates and s.baseline.get("copies", False))


def _with_copies(s: RunState, r: Recode) -> Recode:
    """``r`` with each counted copy coded (and as confident) as its first copy."""
    for c, first in s.copies:
        fid = str(s.usable[first].id)
        r.coded[str(c.id)] = r.coded[fid]
        if r.confidence is not None:
            r.confidence[str(c.id)] = r.confidence[fid]
    return r


def copy_weights(s: RunState) -> list[int] | None:
    """How many responses each usable one stands for: itself and its counted copies (None: there are none)."""
    if not s.copies:
        return None
    w = [1] * len(s.usable)
    for _, first in s.copies:
        w[first] += 1
    return w


def counted(s: RunState) -> int:
    """The responses every count and share is over: the usable ones and their counted copies."""
    return len(s.usable) + len(s.copies)


def _metadata(s: RunState) -> dict[str, Any]:
    return {str(it["id"]): it.get("metadata") for it in s.items}


# Render ---------------------------------------------------------------------------------------------------------


def result_model(s: RunState) -> ThematicResult:
    """The whole result of the run in ``s``, built as the typed model: each part is validated as it is built."""
    assignments, counts, level_counts, other = _assignments(s)
    themes = _themes(s, counts)
    assert s.levels is not None
    levels = s.levels
    n_usable = counted(s)
    parents = [ParentTheme.model_validate(d) for d in describing.level_docs(
        levels.parents, level_counts, n_usable, lambda i: _quote(s, i), children=levels.children)]
    subthemes = [SubTheme.model_validate(d)
                 for d in describing.level_docs(levels.subthemes, level_counts, n_usable, lambda i: _quote(s, i))]
    # describe types the level names and a theme's labeller as plain strings: the model checks their values.
    level = Levels(
        broad=cast(Any, levels.broad),
        fine=cast(Any, levels.fine),
        broad_count=len(parents) if levels.broad == "parents" else len(themes),
        fine_count=len(themes) if levels.fine == "themes" else len(subthemes),
    )
    core: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "themes": themes,
        "parents": parents,
        "subthemes": subthemes,
        "levels": level,
        "seed_themes": s.seed_summary,
        "assignments": assignments,
        "run": _run_info(s, _theme_count(s.choice, len(themes), level), other),
    }
    if s.sentiment is not None:
        core["sentiment"] = s.sentiment
    result = _derive(s, ThematicResult(**core))
    s.checkpoints.timings["insight"] = round(time.perf_counter() - s.insight_started, 3)
    return result.with_(run=result.run.with_(timings_seconds=dict(s.checkpoints.timings)))


def _derive(s: RunState, result: ThematicResult) -> ThematicResult:
    """What follows from the assignments: the recoding against the earlier wave, then ``derive.derived`` and
    the instrument (every job's, so any job can be the earlier wave of a later one)."""
    p, r = s.params, s.recode
    earlier: dict[str, Any] = {}
    if r is not None:
        assert s.baseline is not None
        # The recoding works on the model: each recoded theme and assignment is validated as it is built. Its
        # ``comparison`` is only the earlier wave (job, n, then) until ``derive`` fills the rows: it is handed
        # on, not validated half-built.
        quotes = {str(u.id): u.text[: describing.QUOTE_CHARS] for u in s.usable}
        result, comparison = earlier_wave.carry_over(result, r.coded, s.baseline, quotes, own_words=own_words(s),
                                                     then_counts=r.then_counts, confidence=r.confidence)
        earlier = {"comparison": {**comparison, **r.facts}}
    d = derive.derived({**result.document(), **earlier}, _metadata(s), breakdown_by=p.breakdown_by,
                       min_group_size=p.min_group_size,
                       score=p.score.model_dump() if p.score is not None else None)
    # In the stored order: a theme's sentiment, then the comparison, breakdowns and impact after the run info.
    changes: dict[str, Any] = {}
    if d.theme_sentiment is not None:
        sentiment_of = d.theme_sentiment
        changes["themes"] = [t.with_(sentiment=ThemeSentiment.model_validate(sentiment_of[t.id]))
                             for t in result.themes]
    if d.comparison is not None:
        changes["comparison"] = Comparison.model_validate(d.comparison)
    changes["breakdowns"] = [Breakdown.model_validate(b) for b in d.breakdowns]
    if d.impact is not None:
        changes["impact"] = Impact.model_validate(d.impact)
    result = result.with_(**changes)
    instrument = waves.build(
        s.emb, [a.themes[0].theme_id if a.themes else None for a in result.assignments
                if a.bucket != "unusable" and a.duplicate_of is None],
        [t.id for t in result.themes], [u.text for u in s.usable], encoder_name(s),
        inherited=r.inherited if r is not None else [], weights=copy_weights(s),
    )
    return result.with_(instrument=Instrument.model_validate(instrument))


def own_words(s: RunState) -> earlier_wave.OwnWords:
    """What the describe stage says of groups of this wave's answers (by response id): ``describe.describe`` over
    them as the themes of the job, so each group's keywords and key phrases are its texts' c-TF-IDF terms and
    contextual key phrases against the other groups, as a theme's are against the job's other themes. The recoding
    against an earlier wave gives an earlier theme these (``baseline._own_words``)."""
    index = {str(u.id): n for n, u in enumerate(s.usable)}

    def words(groups: list[list[str]]) -> list[earlier_wave.Words]:
        labels = np.full(len(s.texts), -1, dtype=np.int64)
        for g, ids in enumerate(groups):
            # A counted copy (count_duplicates) is no usable response of its own: its first copy speaks for it.
            labels[[index[rid] for rid in ids if rid in index]] = g
        infos = describing.describe(labels, recentre(labels, s.emb, len(groups)), s.emb, s.texts,
                                    embed=describing.CONTEXTUAL)
        by_group = {int(labels[th.members[0]]): th for th in infos if th.members}
        return [earlier_wave.Words(th.keywords, th.key_phrases, th.description) if (th := by_group.get(g))
                else earlier_wave.Words([], [], "") for g in range(len(groups))]

    return words


def _quote(s: RunState, i: int) -> dict[str, Any]:
    return {"response_id": s.usable[i].id, "text": s.texts[i][: describing.QUOTE_CHARS]}


def _assignments(s: RunState) -> tuple[list[AssignmentOut], dict[str, int], dict[str, int], int]:
    """Every response's assignment (in input order), the count per theme and per level theme, and how many
    usable responses have no theme."""
    assert s.levels is not None
    by_index = _themes_by_index(s)
    themes_by_id = {th.id: th for th in s.themes}
    usable_pos = {r.index: n for n, r in enumerate(s.usable)}
    # ``s.scored``: one per usable response, then one per counted copy (insight_sentiment).
    scored_rows = [*s.usable, *(c for c, _ in s.copies)]
    scored = ({str(r.id): x for r, x in zip(scored_rows, s.scored, strict=True)} if s.scored is not None else None)
    first_of = {c.index: s.usable[first].index for c, first in s.copies}  # a copy's row -> its first copy's row
    built: dict[int, AssignmentOut] = {}
    counts = {th.id: 0 for th in s.themes}
    level_counts: dict[str, int] = {}
    # A response counts in the parent of each of its themes (multi_label), once: codebook.level_ids.
    parent_of = {th.id: th.parent for th in s.themes if th.parent} if s.levels.broad == "parents" else {}
    out: list[AssignmentOut] = []
    other = 0
    for r in s.rows:
        if r.index in first_of:
            # A copy is its first copy's coding under its own id, and says what it copies (the first copy is
            # earlier in the input, so it is built); its own rating (sentiment_from) scores it.
            a = _copy(built[first_of[r.index]].document(), r, scored)
        elif r.status != "ok":
            out.append(AssignmentOut(response_id=r.id, bucket="unusable", themes=[], reason=r.status,
                                     duplicate_of=r.duplicate_of))
            continue
        else:
            a = built[r.index] = _assignment(s, r, usable_pos[r.index], by_index, themes_by_id, scored)
        for ref in a.themes:
            counts[ref.theme_id] += 1
        other += not a.themes
        ids = [ref.theme_id for ref in a.themes]
        for lid in codebook.level_ids(a.broad, a.fine, ids, parent_of) if a.themes else ():
            if lid not in counts:
                level_counts[lid] = level_counts.get(lid, 0) + 1
        out.append(a)
    return out, counts, level_counts, other


def _copy(first: dict[str, Any], r: Any, scored: dict[str, Any] | None) -> AssignmentOut:
    """A counted copy's assignment: its first copy's coding (``first``, as stored) under the copy's own id, with
    what it copies after the themes (where an unusable copy has them). When sentiment comes from a rating
    (``sentiment_from``) the copy's own rating scores it; ``scored`` is by id, its first copy's score otherwise."""
    fields = {"response_id": r.id, "bucket": first["bucket"], "themes": first["themes"], "reason": r.status,
              "duplicate_of": r.duplicate_of}
    fields |= {k: v for k, v in first.items() if k not in fields}
    if "sentiment" in fields and scored is not None:
        x = scored.get(str(r.id))
        fields["sentiment"] = x.to_json() if x is not None else None
    return AssignmentOut.model_validate(fields)


def _assignment(s: RunState, r: Any, n: int, by_index: dict[int, describing.ThemeInfo],
                themes_by_id: dict[str, describing.ThemeInfo], scored: dict[str, Any] | None) -> AssignmentOut:
    """Usable response ``r`` (usable position ``n``)'s assignment."""
    assert s.levels is not None
    ids = [(by_index[t].id, c) for t, c in s.assigned[n].themes if t in by_index]
    refs = [ThemeRef(theme_id=tid, confidence=round(c, 4)) for tid, c in ids]
    # Built in the order the stored document has its keys (``result._Model``).
    fields: dict[str, Any] = {"response_id": r.id, "bucket": "theme" if refs else "other", "themes": refs}
    if refs:
        # Both levels of the primary theme: broad (3-12) and fine.
        fields["broad"], fields["fine"] = describing.level_ids(s.levels, themes_by_id, ids[0][0], n)
    if s.seed_codes is not None:
        fields["seed_codes"] = s.seed_codes[n]
    if scored is not None:
        x = scored.get(str(r.id))
        fields["sentiment"] = Sentiment.model_validate(x.to_json()) if x is not None else None
    return AssignmentOut(**fields)


def _themes(s: RunState, counts: dict[str, int]) -> list[Theme]:
    """The themes, largest first, with their counts, shares and quotes."""
    assert s.levels is not None
    n_usable = counted(s)
    return [
        Theme(
            id=th.id,
            label=th.label,
            description=th.description,
            keywords=th.keywords,
            count=counts[th.id],
            share=round(counts[th.id] / n_usable, 4),
            quotes=[Quote.model_validate(_quote(s, i)) for i in th.quotes],
            parent=th.parent,
            labelled_by=cast(Any, th.labelled_by),
            merged_from=th.merged_from,
            key_phrases=th.key_phrases,
            subthemes=[sub.id for sub in s.levels.subthemes if sub.parent == th.id],
        )
        for th in sorted(s.themes, key=lambda t: -counts[t.id])
    ]


def _theme_count(choice: dict[str, Any], k: int, level: Levels) -> Choice:
    """``run.theme_count``: the cluster stage's choice with, first in the explanation, the count in a
    researcher's words, both levels named ("20 themes in 5 groups; ..."). Derived here, not checkpointed:
    the levels exist only after the describe stage."""
    from .cluster import count_summary

    summary = count_summary({**choice, "k": k}, level.document())
    return Choice.model_validate({**choice, "summary": summary, "explanation": f"{summary} Why: {choice['explanation']}"})


def _run_info(s: RunState, theme_count: Choice, other: int) -> RunInfo:
    unusable = dict.fromkeys(REASONS, 0)
    copies = {c.index for c, _ in s.copies}
    for r in s.rows:
        if r.status != "ok" and r.index not in copies:
            unusable[r.status] += 1
    n_usable, usage = counted(s), s.usage
    return RunInfo(
        pipeline="thematic",
        pipeline_version=PIPELINE_VERSION,
        embedding_model=_embedding_model(s),
        params=s.params.model_dump(mode="json"),
        timings_seconds=s.checkpoints.timings,
        counts=Counts(responses=len(s.rows), usable=n_usable, themed=n_usable - other, other=other,
                      unusable=unusable, pii_redacted=s.pii_counts, duplicates=len(s.copies)),
        theme_count=theme_count,
        merges=[Merge.model_validate(m) for m in s.merges],
        llm=LLMInfo(
            mode=s.params.llm,
            used=usage.calls > 0,
            model=getattr(s.client, "model_name", None) if s.client else None,
            calls=usage.calls,
            cached_calls=usage.cached,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            cost_usd=round(usage.cost_usd, 6),
            note=usage.skipped,
        ),
        resumed_stages=s.checkpoints.resumed,
    )


def _embedding_model(s: RunState) -> dict[str, Any]:
    info, api = s.embedder.info, isinstance(s.embedder, ClientEmbedder)
    return {
        "name": info.name,
        "version": info.version,
        "sha256": info.sha256 or None,
        "dimensions": int(s.emb.shape[1]),
        "max_tokens": info.max_tokens or None,
        "runtime": "api" if api else info.runtime,
        "encoder": "api" if api else getattr(s.embedder, "encoder", None),
        # Which built graph ran (the fast encoder: "int8-vnni" on CPUs with VNNI, else "int8").
        "graph": info.graph or None,
        "languages": s.plan.detected if s.plan is not None else None,
    }
