"""The result document of the thematic pipeline, as pydantic models (its JSON Schema is published from them).

``schema_version`` changes on any incompatible change. Run
``python -c "from pipelines.thematic.result import json_schema; print(json_schema())"``
to print the JSON Schema.
"""

from __future__ import annotations

import json
from typing import Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    ValidatorFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from .clean import Reason

SCHEMA_VERSION = "1.7"
"""1.7 (additive, researcher46): a 0-5 rating can be declared. ``params.sentiment_from.scale`` may be ``0-5``
(``sentiment.rating_range`` "0-5", ``sentiment.scale`` ``rating0to5``: 0-1 negative, 2-3 neutral, 4-5 positive,
scored linearly, 0 inside the band), and ``params.score.scale`` (so ``impact.scale``) a rating range, ``0-5``,
``1-5``, ``1-7`` or ``1-10``, scored as its mean with every value in the range. A model-scored neutral's
``sentiment.score`` is 0 (it was P(positive) - P(negative)); no field changed for it. A 1.6 document is still valid.
Also additive within 1.7 (stats46, no version bump): ``impact.interval`` may be ``permutation`` (Welch's interval
with critical values from 999 permutations of the scores; its star is a permutation test); no field added.
1.6 (additive, researcher45): ``breakdowns[].groups[].synthetic``: "missing" (responses without a value) or
"other" (the pooled small groups) for a group Thematiq made, null for a submitted value. A real value that reads
"(missing)" or "other values" is now its own group (it merged with the synthetic one before). A 1.5 document is
still valid.
1.5 (additive, stats44): ``breakdowns[].groups[].small_n`` and ``breakdowns[].testing.min_n``: a group with fewer
than ``min_n`` (10) usable responses, or whose rest has fewer, is not tested for significance (its cells' ``q`` is
null, ``significant`` false; their p is kept); before, a ``(missing)`` group of one answer could be significant.
``impact.single_label``, ``impact.note`` and ``impact.themes[].explained_by``: every scored response has at most one
theme, so a theme's impact is relative to all the other themes together (an average theme is not 0 when another
drags the score down); a theme whose interval excludes 0 only against other such themes names them and is not
marked as sure. A 1.4 document is still valid.
1.4 (additive): ``breakdowns[].groups[].themes[].test`` (``z`` or ``fisher``: a cell whose smallest
expected count is below ``breakdowns[].testing.exact_below``, 5, is tested by Fisher's exact test, as a comparison
row is since 1.3) and ``breakdowns[].testing`` (the procedure: Benjamini-Hochberg over the breakdown's cells). A
1.3 document is still valid; its breakdown cells were all z-tested. Also 1.4 (additive):
``params.sentiment_from`` may declare its scale (``{"key", "scale"}``); ``sentiment.rating_range`` (1-5, 1-7,
1-10 or 0-10) and ``sentiment.scale_from`` (``declared`` or ``inferred``) say which scale read the rating, and
``sentiment.scale`` may be ``likert7`` (1-7) or ``rating10`` (1-10), both only when declared. Also 1.4
(additive): ``impact.interval`` (``welch``: Welch's t interval; absent before, when it was a percentile
bootstrap). Also 1.4 (additive): ``params.count_duplicates`` (default true) counts an exact or near copy of an
earlier answer with its first copy's themes (bucket ``theme``/``other``, ``reason`` and ``duplicate_of`` kept), and
``run.counts.duplicates`` says how many; before, and with false, copies were ``unusable``; ``comparison.copies``
says whether the comparison counts them (only when both waves do). Also 1.4 (additive):
``assignments[].reason`` may be ``no_answer`` (an explicit non-answer: "N/A", "none", "-", "no comment"; before,
such a text was ``gibberish`` or themed) and ``run.counts.unusable`` has its ``no_answer`` count; a short real
answer ("TV", "Thx", a link) is no longer ``gibberish``.
1.3 (additive, researcher38): ``impact.min_n`` and ``impact.themes[].small_n`` (a theme with fewer scored
responses is never marked as excluding 0); ``comparison.themes[].test`` / ``groups[].test`` (``z`` or
``fisher``: Fisher's exact test where an expected count is below ``comparison.testing.exact_below``, 5);
``comparison.warning`` (discover mode: approximate significance, and its gone themes are not tested). A 1.2
document is still valid.
1.2 (additive, issue 23): ``instrument`` (every job: the coder a later wave is counted with), ``impact``
(with ``params.score``), ``comparison.mode`` / ``instrument`` / ``far``; a new theme's comparison row has
``change``, ``p`` and ``q`` null (it is not tested against a share of 0). Readers of 1.1 fields need none of
the new ones; a 1.1 document is still valid.
1.1 (additive): ``levels``, ``subthemes``, ``parents`` always for > 12 themes with description / share /
quotes, ``assignments[].broad`` / ``fine``, ``themes[].key_phrases`` / ``subthemes``, ``run.theme_count``
confidence fields, ``run.merges``. Every 1.0 field is still there with the same meaning.
Also additive within 1.1 (issue 15): ``assignments[].sentiment``, ``themes[].sentiment``, ``sentiment``,
``breakdowns``, ``comparison`` and ``edits``; a reader of the fields above needs none of them.
1.2 (additive, issue 22): ``run.theme_count.summary`` (the count in words, both levels named; also the start of
``explanation``), ``noise`` (the silhouette curve's seed noise) and ``broad_k`` (the broad level's peak).
1.2 (additive, issue 23): ``sentiment.source`` may be ``model`` (``params.sentiment = "model"``, the classifier
over the job's embeddings; the default since sent23, which changed no field: a job it cannot score has source
``lexicon`` and a ``note``, as before); ``themes[].sentiment.nps`` when the sentiment is a 0-10 rating, whose per-response score is now
its NPS contribution (-1 / 0 / +1) so that label and mean are on one scale. Every 1.1 field is still there.
1.2 (additive, issue 23): ``comparison.groups`` (families of near earlier themes, each tested pooled, BH over the
families; waves.family_tests) and ``comparison.then[id].family``; both absent or empty in older documents.
1.2 (additive, issue 23): ``comparison.testing`` (the multiple-testing procedure behind ``q``: Benjamini-Hochberg,
or weighted BH with weights from the pooled counts) and ``weight`` on each tested comparison row and family (1 under
plain BH); absent in older documents, whose ``q`` are plain BH."""


class _Model(BaseModel):
    """A part of the result, written as its builder gave it: the fields it was given, in that order.

    The stored bytes of a result are its JSON (``json.dumps``, shared/runtime/child.py), and readers, the
    parity bench (``bench/stage_parity.py``) and earlier waves' documents see the key order and which keys are
    present. A stage builds the parts from typed values (``Theme(id=..., label=...)``), each validated where it
    is built; the document (:meth:`document`) leaves out what was not given (a field at its default stays
    absent, as in a document from before it existed) and keeps the order it was given in, which is not always
    the declaration order (a recoded theme is written in the earlier wave's order, ``baseline._earlier_theme``).
    """

    model_config = ConfigDict(extra="forbid")
    #: The fields given, in the order given.
    _given: tuple[str, ...] = PrivateAttr(default=())

    @model_validator(mode="wrap")
    @classmethod
    def _remember_order(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        model = handler(data)
        if isinstance(data, dict) and isinstance(model, _Model):
            # model_fields read once: on the class it is a property (~1.5 µs a read), and this runs for every
            # part of a result (issue 27: ~6,000 per 2,000 answers).
            fields = cls.model_fields
            model._given = tuple(k for k in data if k in fields)
        return model

    @model_serializer(mode="wrap")
    def _in_given_order(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        return {k: out[k] for k in self._given if k in out}

    def document(self) -> dict[str, Any]:
        """This part as the stored JSON has it (plain dicts and lists)."""
        return self.model_dump()

    def without(self, *names: str) -> Self:
        """A copy in which the fields ``names`` were not given (at their defaults, left out of the document); a
        later :meth:`with_` of one of them puts it last."""
        return self.model_validate({k: getattr(self, k) for k in self._given if k not in names})

    def with_(self, **changes: Any) -> Self:
        """A copy with ``changes`` validated: a field given before keeps its place, a new one comes last (as a
        dict's update would put it)."""
        given = {k: getattr(self, k) for k in self._given}
        return self.model_validate({**given, **changes})


class Quote(_Model):
    response_id: str | int
    text: str


class ThemeSentiment(_Model):
    """How the responses of one theme (primary theme) feel: counts per label and the mean score."""

    positive: int
    neutral: int
    negative: int
    mean: float | None = Field(description="mean score in [-1, 1]; null when no response has a sentiment")
    nps: float | None = Field(
        default=None, description="the theme's NPS (-100..100) when the sentiment is a 0-10 rating (= mean x 100)"
    )


class Theme(_Model):
    id: str
    label: str
    description: str
    keywords: list[str]
    count: int
    share: float = Field(description="count / number of usable responses")
    quotes: list[Quote]
    parent: str | None = None
    labelled_by: Literal["keywords", "llm"]
    merged_from: list[str] = Field(default_factory=list)
    key_phrases: list[str] = Field(
        default_factory=list, description="KeyBERT-style key phrases (embedding-ranked, MMR); the first is the label"
    )
    subthemes: list[str] = Field(default_factory=list, description="ids of this theme's sub-themes (<= 12 themes)")
    sentiment: ThemeSentiment | None = None


class ParentTheme(_Model):
    """A broad theme grouping several themes (when there are more than 12 themes)."""

    id: str
    label: str
    keywords: list[str]
    count: int
    children: list[str]
    description: str = ""
    key_phrases: list[str] = Field(default_factory=list)
    share: float = 0.0
    quotes: list[Quote] = Field(default_factory=list)


class SubTheme(_Model):
    """A finer theme inside one theme (when there are at most 12 themes); id ``t1.2`` = 2nd sub-theme of t1."""

    id: str
    parent: str
    label: str
    description: str
    keywords: list[str]
    key_phrases: list[str] = Field(default_factory=list)
    count: int
    share: float
    quotes: list[Quote] = Field(default_factory=list)


class Levels(_Model):
    """Where the two levels are: broad themes (3-12) and the finer ones under them."""

    broad: Literal["parents", "themes"]
    fine: Literal["themes", "subthemes"]
    broad_count: int
    fine_count: int


class ThemeRef(_Model):
    theme_id: str
    confidence: float


class SeedCode(_Model):
    name: str
    confidence: float
    coded_by: Literal["embedding", "llm"]


class Sentiment(_Model):
    label: Literal["positive", "neutral", "negative"]
    score: float = Field(
        description="-1 (negative) .. 1 (positive): P(positive) - P(negative) of the model for a positive or "
        "negative label and 0 for a neutral one (since 2026-12-08; a neutral kept its lean before), VADER's "
        "compound score, the LLM's score, stars rescaled, or a 0-10 rating's NPS contribution (-1 / 0 / +1)"
    )


class AssignmentOut(_Model):
    response_id: str | int
    bucket: Literal["theme", "other", "unusable"]
    themes: list[ThemeRef]
    reason: Reason | None = Field(
        default=None,
        description="why unusable: empty, no_answer (an explicit non-answer: N/A, none, -, no comment), gibberish, "
        "exact_duplicate, near_duplicate; on a copy counted with its first copy (1.4, params.count_duplicates), "
        "which kind of copy",
    )
    duplicate_of: str | int | None = Field(default=None, description=(
        "the first copy's id, on a copy; a counted copy (bucket theme or other) has the first copy's themes"))
    seed_codes: list[SeedCode] | None = None
    broad: str | None = Field(default=None, description="broad-level theme of the primary theme (a p… or t… id)")
    fine: str | None = Field(
        default=None, description="fine-level theme (a t… or t….n id); null when the theme has no sub-themes"
    )
    sentiment: Sentiment | None = None


class SeedThemeOut(_Model):
    name: str
    description: str
    count: int
    share: float


class Choice(_Model):
    criterion: str = Field(description="silhouette | prior (weak structure: a judgement) | fixed | single")
    explanation: str
    scores: list[dict[str, int | float]] = Field(description="the curve: each count tried (k, an int) with its scores")
    k: int | None = Field(default=None, description="themes in the result (after small themes were folded)")
    k_chosen: int | None = None
    confidence: float | None = Field(default=None, description="0..1: how strongly the data single out this count")
    confidence_label: Literal["high", "medium", "low"] | None = None
    structure: float | None = Field(default=None, description="best mean cosine silhouette; < 0.06 is weak")
    alternatives: list[int] = Field(default_factory=list, description="other counts about as well supported")
    k_range: list[int] = Field(default_factory=list)
    cap: int | None = Field(default=None, description="the largest count considered (adaptive)")
    fine_k: int | None = None
    summary: str | None = Field(default=None, description='the count in words: "20 themes in 5 groups; the data also support 9 or 39 themes. ..."')
    noise: float | None = Field(default=None, description="seed noise of the silhouette curve: the unit the count is decided in")
    broad_k: int | None = Field(default=None, description="the broad level's peak (5..12) of the curve")


class Merge(_Model):
    into: str
    merged: list[str]
    by: Literal["centroid+keywords", "llm"]
    centroid_similarity: float | None = None
    separation: float | None = None
    keyword_overlap: float | None = None


class Counts(_Model):
    responses: int
    usable: int
    themed: int
    other: int
    unusable: dict[str, int]
    pii_redacted: dict[str, int]
    duplicates: int | None = Field(default=None, description=(
        "new in 1.4: exact or near copies of an earlier answer counted with it (params.count_duplicates): part of "
        "usable and themed/other, never clustered or quoted; 0 when none or not counted"))


class LLMInfo(_Model):
    mode: Literal["off", "auto", "required"]
    used: bool
    model: str | None
    calls: int
    cached_calls: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    note: str | None = None


class RunInfo(_Model):
    pipeline: str
    pipeline_version: str
    embedding_model: dict[str, Any]
    params: dict[str, Any]
    timings_seconds: dict[str, float]
    counts: Counts
    theme_count: Choice
    merges: list[Merge] = Field(default_factory=list)
    llm: LLMInfo
    resumed_stages: list[str]


class SentimentInfo(_Model):
    source: Literal["model", "lexicon", "llm", "metadata"] = Field(
        description="what made the sentiment: the classifier over the embeddings, VADER, the LLM, or a rating"
    )
    field: str | None = Field(default=None, description="the metadata rating used (source metadata)")
    model: str | None = None
    scale: Literal["stars", "score10", "words", "likert7", "rating10", "rating0to5"] | None = Field(
        default=None, description=(
            "how the rating reads (source metadata): stars 1-5, score10 0-10 as NPS groups, words positive/neutral/"
            "negative; new in 1.4: likert7 1-7 and rating10 1-10 (declared only); new in 1.7: rating0to5 0-5 "
            "(declared only: 0-1 negative, 2-3 neutral, 4-5 positive)"))
    rating_range: Literal["0-5", "1-5", "1-7", "1-10", "0-10"] | None = Field(default=None, description=(
        "new in 1.4: the rating's range (source metadata; null for words); 0-5 new in 1.7"))
    scale_from: Literal["declared", "inferred"] | None = Field(default=None, description=(
        "new in 1.4: whether the scale was declared (params.sentiment_from.scale) or inferred from the values "
        "(absent in an older result: inferred)"))
    scored: int = 0
    note: str | None = Field(
        default=None, description="why some or all responses were scored otherwise (LLM budget, another encoder)"
    )


class ComparisonTesting(_Model):
    """How "significant" was decided (insight.testing): in a comparison, and (1.4) in a breakdown."""

    procedure: Literal["bh", "weighted-bh"]
    weights: str | None = Field(description="what the weights are made of (null: all 1)")
    alpha: float
    reference: str
    exact_below: float | None = Field(default=None, description=(
        "new in 1.3: a row whose smallest expected count is below this is tested by Fisher's exact test"))
    min_n: int | None = Field(default=None, description=(
        "new in 1.5, breakdowns only: a group (or its rest) with fewer usable responses is small_n, not tested"))


class BreakdownCell(_Model):
    theme_id: str
    count: int
    share: float = Field(description="count / n of the group")
    lift: float | None = Field(description="share in the group / share in the rest; null when the rest has none")
    p: float = Field(description="two-sided, group against the rest: the two-proportion z-test, or Fisher's exact "
                     "test (see test)")
    test: Literal["z", "fisher"] | None = Field(default=None, description=(
        "new in 1.4: the test behind p: the pooled z-test, or Fisher's exact test when an expected count is below "
        "the breakdown's testing.exact_below; absent in an older result (z)"))
    q: float | None = Field(description=(
        "Benjamini-Hochberg q over the tested cells of this breakdown; null (1.5) in a small_n group (not tested)"))
    significant: bool = Field(description="q < 0.05; never in a small_n group")


class BreakdownGroup(_Model):
    value: str = Field(description=(
        'a value, a range, or a synthetic group\'s name, "other values" (pooled small groups) or "(missing)": read '
        "synthetic to tell them from a real value of that text"))
    n: int
    themes: list[BreakdownCell]
    small_n: bool = Field(default=False, description=(
        "new in 1.5: the group, or the rest, has fewer than testing.min_n usable responses: its cells are not tested "
        "for significance (q null, never significant); their p is still given"))
    synthetic: Literal["missing", "other"] | None = Field(default=None, description=(
        "new in 1.6: \"missing\" for the responses without a value, \"other\" for the pooled small groups (both named "
        "in value); null for a value a response has, even one that reads \"(missing)\" or \"other values\" (before "
        "1.6 such a value merged with the synthetic group; an older document has no synthetic)"))


class Breakdown(_Model):
    field: str
    kind: Literal["categorical", "nps", "numeric"]
    groups: list[BreakdownGroup]
    testing: ComparisonTesting | None = Field(default=None, description=(
        "new in 1.4: how its cells were tested (Benjamini-Hochberg over all of them; exact_below: the expected "
        "count under which a cell is tested by Fisher's exact test); absent in an older result (all z)"))


class ThenTheme(_Model):
    label: str
    count: int
    family: str | None = Field(default=None, description="its family of near earlier themes (waves.families)")
    split_into: list[str] | None = Field(default=None, description=(
        "new in 1.4 (2026-12-07): the themes a codebook edit split off it in this wave (or merged its split-off "
        "into); its earlier count covered them too, so its row and theirs are not tested (p, q, change null) and "
        "its family is tested with them pooled back in"))


class ComparisonRow(_Model):
    theme_id: str
    label: str
    share_then: float
    share_now: float
    change: float | None = Field(description="share_now - share_then; null for a new theme (not tested)")
    count_then: int
    count_now: int
    p: float | None = Field(description="two-proportion z-test, now against then; null for a new theme")
    q: float | None = Field(description="Benjamini-Hochberg q over the tested themes; null for a new theme")
    significant: bool
    status: Literal["kept", "new", "gone"]
    weight: float | None = Field(default=None, description="its weight in the (weighted) BH: 1 under plain BH, else "
                                 "mean 1 over the tested themes, from the pooled count then + now; null for a new "
                                 "theme (not tested) or an older result")
    test: Literal["z", "fisher"] | None = Field(default=None, description=(
        "new in 1.3: the test behind p: the pooled z-test, or Fisher's exact test when an expected count is below "
        "testing.exact_below; null for a new theme (not tested) or an older result (z)"))


class ComparisonGroup(_Model):
    """A family of two or more near earlier themes, tested as one share (waves.family_tests)."""

    family: str
    theme_ids: list[str]
    count_then: int
    count_now: int
    share_then: float
    share_now: float
    change: float
    p: float = Field(description="two-proportion z-test of the pooled share, now against then")
    q: float = Field(description="Benjamini-Hochberg q over the families (see comparison.testing)")
    significant: bool
    weight: float | None = Field(default=None, description="its weight in the BH over the families (1 under plain BH)")
    test: Literal["z", "fisher"] | None = Field(default=None, description="new in 1.3: as ComparisonRow.test")


class Comparison(_Model):
    job_id: str = Field(description="the earlier job (params.compare_to)")
    n_then: int
    n_now: int
    then: dict[str, ThenTheme]
    themes: list[ComparisonRow]
    new: list[str]
    gone: list[str]
    mode: Literal["inherit", "discover"] | None = Field(default=None, description="params.compare_mode (1.2)")
    instrument: Literal["centroids", "prototypes"] | None = Field(
        default=None, description="what coded both waves: the earlier job's stored centroids, or (an earlier "
        "result without them, or discover mode) prototypes from its labels and quotes, with its clustering's counts")
    far: int | None = Field(default=None, description="responses far from every earlier theme (inherit)")
    copies: bool | None = Field(default=None, description=(
        "new in 1.4: whether n_now, count_now and far count copies of an answer (params.count_duplicates): only "
        "when the earlier wave did too; false against a result from before 1.4, so both waves count distinct answers"))
    groups: list[ComparisonGroup] = Field(default_factory=list, description="families of near earlier themes, "
                                          "each tested pooled, BH over the families")
    testing: ComparisonTesting | None = Field(default=None, description="the multiple-testing procedure behind q "
                                              "and significant (absent in older results: plain BH)")
    warning: str | None = Field(default=None, description=(
        "new in 1.3: what a reader must know before trusting `significant` (discover mode: the waves were not "
        "counted by one coder, significance is approximate, gone themes are not tested)"))


class SplitRule(_Model):
    keyword: str
    theme_id: str | None
    count: int = 0


class InstrumentCode(_Model):
    theme_id: str | None = Field(description="the theme this centroid codes to; null after a delete (other)")
    centroid: str = Field(description="unit vector, little-endian float16, base64")
    radius: float = Field(description=(
        "2nd percentile of its members' cosine (waves.RADIUS_QUANTILE): below every radius is far"))
    count: int = Field(description="this job's usable responses the instrument codes here")
    splits: list[SplitRule] = Field(default_factory=list, description="keyword rules of split edits")


class Instrument(_Model):
    """The coder a later wave is counted with (waves.py): nearest centroid at cosine >= floor."""

    encoder: str = Field(description="embedding model name@sha256: centroids compare only within one encoder")
    floor: float
    n: int
    codes: list[InstrumentCode]


class ImpactTheme(_Model):
    theme_id: str
    label: str
    n: int = Field(description="scored responses with this theme")
    score: float | None = Field(description="their score: NPS (points) for nps, else the mean")
    impact: float | None = Field(description="overall score minus the score of the responses without this theme")
    ci_low: float | None = Field(description=(
        "95% interval of impact, as `impact.interval` says: Welch's standard error with permutation critical values "
        "(since 1.7), Welch's t (1.4 to 1.7), a percentile bootstrap (until 1.3)"))
    ci_high: float | None
    small_n: bool = Field(default=False, description=(
        "new in 1.3: fewer than `impact.min_n` scored responses have the theme; its interval is not to be trusted "
        "and it is never marked as excluding 0"))
    explained_by: list[str] | None = Field(default=None, description=(
        "new in 1.5, with impact.single_label: its interval excludes 0 only because of these themes (of the "
        "opposite sign, whose intervals exclude 0 too): without their responses it covers 0. Never marked as sure"))


class Impact(_Model):
    key: str
    scale: Literal["nps", "csat", "numeric", "0-5", "1-5", "1-7", "1-10"] = Field(description=(
        "params.score.scale; new in 1.7: a declared rating range (0-5, 1-5, 1-7, 1-10), scored as its mean"))
    overall: float | None
    n: int = Field(description="usable responses with a score")
    min_n: int | None = Field(default=None, description="new in 1.3: a theme with fewer scored responses is small_n")
    interval: Literal["welch", "permutation"] | None = Field(default=None, description=(
        "new in 1.4: how ci_low / ci_high were made: Welch's t interval given the theme's responses (\"welch\"); "
        "since stats46 \"permutation\": Welch's interval with critical values from 999 permutations of the scores "
        "(it excludes 0 exactly when a permutation test of Welch's statistic rejects at 5 %); "
        "absent in older results, whose intervals were a percentile bootstrap"))
    themes: list[ImpactTheme] = Field(description="ranked by impact, most negative first")
    single_label: bool | None = Field(default=None, description=(
        "new in 1.5: every scored response has at most one theme; then a theme's impact is relative to all the other "
        "themes together, and an average theme's impact is not 0 when another theme scores far lower or higher"))
    note: str | None = Field(default=None, description="new in 1.5: how to read the impacts (with single_label)")


class ThematicResult(_Model):
    schema_version: Literal["1.1", "1.2", "1.3", "1.4", "1.5", "1.6", "1.7"]
    themes: list[Theme]
    parents: list[ParentTheme] = Field(default_factory=list)
    subthemes: list[SubTheme] = Field(default_factory=list)
    levels: Levels | None = None
    seed_themes: list[SeedThemeOut] | None = None
    assignments: list[AssignmentOut]
    run: RunInfo
    sentiment: SentimentInfo | None = None
    breakdowns: list[Breakdown] = Field(default_factory=list)
    comparison: Comparison | None = None
    edits: list[dict[str, Any]] = Field(
        default_factory=list, description="the codebook edits applied since the run, oldest first (PATCH themes)"
    )
    instrument: Instrument | None = None
    impact: Impact | None = None


def json_schema() -> str:
    return json.dumps(ThematicResult.model_json_schema(), indent=2)
