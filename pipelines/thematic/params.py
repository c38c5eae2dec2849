"""Job parameters of the thematic pipeline and the input limits, validated at submission."""

from __future__ import annotations

import re
import unicodedata
from typing import Annotated, Any, Final, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StringConstraints,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

from shared.sdk.errors import ParamError

from .insight import MAX_BREAKDOWN_FIELDS, MIN_GROUP_SIZE

#: Largest number of responses in one job. 100k embeds in ~15 min on 2 cores
#: and clusters within a few GiB; more should be split into several jobs.
MAX_RESPONSES: Final = 100_000
#: Longest accepted text, in characters. The model reads 256 word pieces
#: (~1,000 characters), so longer texts are embedded from their beginning.
MAX_TEXT_CHARS: Final = 20_000
#: Values of ``language``: "en" (the English encoders), "auto" (detected per
#: response; the multilingual encoder when the texts are not all English), or
#: one language, which selects the multilingual encoder (see lang.py, embed.py).
SUPPORTED_LANGUAGES: Final = (
    "en",
    "auto",
    "de",
    "fr",
    "es",
    "it",
    "pt",
    "nl",
    "pl",
    "zh",
    "ja",
    "ko",
    "ru",
    "ar",
    "tr",
    "th",
)
#: Default input size from which the embed stage fans out over chunk workers.
#: Below it one process is faster: each chunk pays a process start and a
#: model load (~1.5 s), and 5,000 short answers embed in ~1 min on 2 cores.
FANOUT_MIN_RESPONSES: Final = 5_000
#: Default texts per embed chunk: ~10 s of embedding for survey-length answers,
#: long enough to amortise a chunk's start-up, short enough to spread well.
FANOUT_CHUNK_SIZE: Final = 1_000


#: The longest metadata key a job's responses may have (shared.config.constants.MAX_METADATA_KEY_CHARS, which
#: pipelines may not import; a test holds the two equal): a survey question as a CSV header is easily 150.
METADATA_KEY_MAX: Final = 200
#: A metadata key as a client names it: any key the platform takes at submission (at 100 characters, a job with a
#: longer key could not break down by it, score it or take its sentiment from it).
MetadataKey = Annotated[str, StringConstraints(min_length=1, max_length=METADATA_KEY_MAX)]
#: A job id (28 lowercase hex digits, shared.core.jobs.new_job_id); pipelines may not import shared.core.
JOB_ID_PATTERN: Final = r"^[0-9a-f]{28}$"


#: Characters no label shows: C0 and C1 controls (NUL, line breaks, escapes), the Unicode line and paragraph
#: separators, and the bidirectional overrides and isolates, which turn the rest of a line around in whatever shows
#: the label (a spreadsheet, a report).
_INVISIBLE: Final = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
#: The same, but a description may hold line breaks and tabs.
_INVISIBLE_IN_TEXT: Final = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _shows(value: str) -> bool:
    # A letter, mark, digit, punctuation or symbol: not only spaces and format characters (a zero-width space, a BOM,
    # a word joiner), which show nothing.
    return any(unicodedata.category(c)[0] not in "ZC" for c in value)


def visible_name(value: str) -> str:
    if not _shows(value):
        raise ValueError("a label needs a visible character")
    if _INVISIBLE.search(value):
        raise ValueError("no control characters, line breaks or direction overrides")
    return value


def shown_name(value: str, fallback: str) -> str:
    """``value`` as a name ``visible_name`` takes: invisible characters as spaces, trimmed; ``fallback`` if empty."""
    shown = _INVISIBLE.sub(" ", value).strip()
    return shown if _shows(shown) else fallback


def visible_text(value: str) -> str:
    if _INVISIBLE_IN_TEXT.search(value):
        raise ValueError("no control characters or direction overrides")
    return value


def shown_text(value: str) -> str:
    """``value`` as a description ``visible_text`` takes: the characters it refuses as spaces (a served codebook's
    description quotes answers, which may hold them, and must go back as ``seed_themes`` as it is)."""
    return _INVISIBLE_IN_TEXT.sub(" ", value)


#: The limits of a codebook entry; a served codebook (``codebook.codebook``) keeps within them.
SEED_NAME_MAX: Final = 120
SEED_DESCRIPTION_MAX: Final = 1000
SEED_KEYWORD_MAX: Final = 60
SEED_KEYWORDS_MAX: Final = 20
SEED_EXAMPLE_MAX: Final = 2000
SEED_EXAMPLES_MAX: Final = 10


class SeedTheme(BaseModel):
    """One entry of a user-supplied codebook."""

    model_config = ConfigDict(extra="forbid")

    #: Shown as a theme's label: visible text on one line, as a codebook edit's label (``codebook.Label``).
    name: Annotated[str, Field(min_length=1, max_length=SEED_NAME_MAX), AfterValidator(visible_name)]
    #: As a codebook edit's description (``codebook.Rename``): line breaks and tabs, but no NUL, other control
    #: character or direction override (review46: taken here, refused by the edit, and shown reordered).
    description: Annotated[str, Field(max_length=SEED_DESCRIPTION_MAX), AfterValidator(visible_text)] = ""
    #: The rest of a served codebook entry (``?format=codebook``), so a codebook can be sent back as it is:
    #: keywords sharpen the code's embedding; id, examples and count are accepted and not used.
    keywords: list[Annotated[str, StringConstraints(max_length=SEED_KEYWORD_MAX)]] = Field(
        default_factory=list, max_length=SEED_KEYWORDS_MAX
    )
    id: str | None = Field(default=None, max_length=40)
    examples: list[Annotated[str, StringConstraints(max_length=SEED_EXAMPLE_MAX)]] = Field(
        default_factory=list, max_length=SEED_EXAMPLES_MAX
    )
    count: int | None = None


#: A rating's range as ``params.score.scale`` declares it (researcher46): the mean of the rating, every value in
#: the range. The linear ranges of ``RatingRange``; "0-10" is not one, since there it means NPS groups ("nps").
ScoreRange = Literal["0-5", "1-5", "1-7", "1-10"]


class ScoreParam(BaseModel):
    """``params.score``: the metadata key holding a score, and how to read it (impact.py)."""

    model_config = ConfigDict(extra="forbid")

    key: MetadataKey
    #: "nps": integers 0-10, the NPS (promoters 9-10 minus detractors 0-6, in points); "csat": 1-5, the mean;
    #: "numeric": any number, the mean; a ``ScoreRange`` ("0-5", "1-5", "1-7", "1-10"): a rating on that range,
    #: the mean (a value outside it is a 422 naming params.score.scale).
    scale: Literal["nps", "csat", "numeric", "0-5", "1-5", "1-7", "1-10"] = "numeric"


#: A declared rating scale of ``params.sentiment_from``: its range. "0-5", "1-5", "1-7" and "1-10" are ratings
#: read linearly (the middle is neutral); "0-10" is a likelihood-to-recommend score read as NPS groups.
RatingRange = Literal["0-5", "1-5", "1-7", "1-10", "0-10"]
_METADATA_KEY: Final = TypeAdapter(MetadataKey)


class SentimentFrom(BaseModel):
    """``params.sentiment_from``: a metadata rating to take the sentiment from, and (optionally) its scale.

    Sent as a plain key (``"stars"``: the scale is inferred from the values, as before) or as
    ``{"key": "ltr", "scale": "0-10"}``: a declared scale wins over the values, so a 0-10 survey whose answers
    happen to lie in 1-5 is not read as stars. Written back in the form it was given (a key stays a string).
    """

    model_config = ConfigDict(extra="forbid")

    key: MetadataKey
    #: None: inferred from the values (sentiment.rating_scale); the plain-string form.
    scale: RatingRange | None = None

    @model_serializer(mode="wrap")
    def _as_given(self, handler: SerializerFunctionWrapHandler) -> Any:
        # The stored params and run.params keep a plain key a plain key (readers of 1.3 jobs' params).
        return self.key if self.scale is None else handler(self)


#: The rating range a ``params.score.scale`` declares its key to be on, in ``RatingRange``'s terms: "nps" is the
#: integers 0-10 (NPS groups, as sentiment_from "0-10" reads them), "csat" 1-5; "numeric" declares no range.
SCORE_RANGE: Final[dict[str, RatingRange]] = {"nps": "0-10", "csat": "1-5", "0-5": "0-5", "1-5": "1-5", "1-7": "1-7",
                                             "1-10": "1-10"}


class ThematicParams(BaseModel):
    """Parameters of a thematic-analysis job."""

    model_config = ConfigDict(extra="forbid")

    #: Themes smaller than this are folded into their nearest theme or `other`.
    min_theme_size: int = Field(default=5, ge=1, le=10_000)
    #: "auto" chooses the count (see cluster.py); an int fixes it.
    num_themes: Literal["auto"] | int = "auto"
    #: Upper bound of the automatic count. None (default): adaptive, min(200, n / min_theme_size, 4·sqrt(n))
    #: (see cluster.auto_cap); an int lowers that bound.
    max_themes: int | None = Field(default=None, ge=1, le=200)
    language: Literal[
        "en", "auto", "de", "fr", "es", "it", "pt", "nl", "pl", "zh", "ja", "ko", "ru", "ar", "tr", "th"
    ] = "en"
    #: The embedded encoder: "fast" (all-MiniLM-L6-v2 int8), "quality" (all-mpnet-base-v2 int8, the optional
    #: ``thematiq[quality]`` install), "multilingual" (USE multilingual v3). English-only encoders are replaced
    #: by the multilingual one when ``language`` is not English (explicitly, or detected under "auto").
    embedding: Literal["fast", "quality", "multilingual"] = "fast"
    llm: Literal["off", "auto", "required"] = "auto"
    seed_themes: list[SeedTheme] | None = Field(default=None, max_length=100)
    # JSON booleans only (strict): lax pydantic read "yes", "on", "1" and 1 as true, so a client's string passed.
    multi_label: bool = Field(default=False, strict=True)
    #: An exact or near copy of an earlier answer ("Good" from forty people) is forty respondents: counted with its
    #: first copy's themes in every count and share, its own metadata, rating and score. Copies are never
    #: clustered, labelled or quoted (a pasted answer cannot form a theme). False: copies are unusable, as before 1.4.
    #: Strict: a JSON boolean only ("yes" or 1 is a 422 naming it, not read as true).
    count_duplicates: bool = Field(default=True, strict=True)
    #: Redact emails, phone and card numbers before text is sent to an LLM.
    #: None means "on whenever an LLM is used".
    redact_pii: bool | None = Field(default=None, strict=True)
    seed: int = Field(default=0, ge=0, le=2**31 - 1)
    #: Usable responses from which embedding (and LLM coding against
    #: ``seed_themes``) runs as a map stage over chunk workers; larger than
    #: the input limit disables fan-out. Execution only: the result is the same.
    fanout_min_responses: int = Field(default=FANOUT_MIN_RESPONSES, ge=1, le=MAX_RESPONSES + 1)
    #: Texts per embed chunk when fanning out (LLM coding uses at most 250,
    #: rounded to whole coding batches). Execution only.
    fanout_chunk_size: int = Field(default=FANOUT_CHUNK_SIZE, ge=1, le=MAX_RESPONSES)
    #: Metadata keys to break the themes down by (at most 5). Every key must occur in the input's metadata
    #: (checked at submission, ``validate.prepare``): a typo is a 422, not a table of "(missing)".
    breakdown_by: list[MetadataKey] | None = Field(default=None, max_length=MAX_BREAKDOWN_FIELDS)
    #: Groups of a breakdown smaller than this are pooled as "other values".
    min_group_size: int = Field(default=MIN_GROUP_SIZE, ge=1, le=10_000)
    #: Sentiment per response: "model" (default: a classifier over the job's own MiniLM embeddings, offline;
    #: it beats the lexicon on every measured out-of-domain set, docs/sentiment.md; a job
    #: embedded otherwise, by another language's encoder, "quality" or an embeddings deployment, is scored by
    #: the lexicon and ``sentiment.note`` says why), "lexicon" (VADER, offline, English), "llm" (the configured
    #: LLM; 422 when none is configured, llm is off, or the input has more than sentiment.LLM_MAX_RESPONSES),
    #: or "off".
    sentiment: Literal["model", "lexicon", "llm", "off"] = "model"
    #: A metadata rating to use as the sentiment instead: a key (its scale inferred from the values: 1-5 stars,
    #: 0-10 NPS, or positive/neutral/negative) or {"key", "scale"} with a declared ``RatingRange``.
    sentiment_from: SentimentFrom | None = None
    #: With an LLM, the language theme labels and descriptions are written in (one of ``language``'s codes);
    #: quotes always stay in their own language. None: the LLM answers in the responses' language. Without
    #: an LLM labels are phrases taken from the responses, so asking for a language then is a 422.
    label_language: Literal[
        "en", "de", "fr", "es", "it", "pt", "nl", "pl", "zh", "ja", "ko", "ru", "ar", "tr", "th"
    ] | None = None
    #: Id of an earlier succeeded thematic job of the same tenant: its themes (with their edits) are carried
    #: into this job and the result gains ``comparison`` (share then and now, per theme).
    compare_to: str | None = Field(default=None, pattern=JOB_ID_PATTERN)
    #: With ``compare_to``: "inherit" (default) codes this wave with the earlier job's themes and instrument and
    #: calls a theme new only when its answers are far from every earlier theme (waves.py); "discover" finds
    #: themes afresh and maps them onto the earlier ones (the behaviour before issue 23).
    compare_mode: Literal["inherit", "discover"] = "inherit"
    #: A metadata score to measure each theme's impact on (``result.impact``): {"key", "scale"}.
    score: ScoreParam | None = None

    @field_validator("max_themes", "min_theme_size", "seed", "fanout_min_responses",
                     "fanout_chunk_size", "min_group_size", mode="before")
    @classmethod
    def _no_boolean_counts(cls, value: object) -> object:
        # JSON true is no count: lax validation would read it as 1 (a one-theme job for {"num_themes": true}).
        # (The service validates strictly as well, which refuses it too; this holds for any other caller.)
        if isinstance(value, bool):
            raise ValueError("expected an integer, not a boolean")
        return value

    @field_validator("num_themes", mode="before")
    @classmethod
    def _auto_or_an_integer(cls, value: object) -> object:
        # One error naming params.num_themes: the union's own errors name its members
        # (params.num_themes.literal['auto'] and params.num_themes.int).
        if value != "auto" and type(value) is not int:
            raise ValueError("expected 'auto' or an integer")
        return value

    @field_validator("breakdown_by")
    @classmethod
    def _unique_keys(cls, keys: list[str] | None) -> list[str] | None:
        # A field_validator, so the 422 names params.breakdown_by rather than params.
        if keys is not None and len(set(keys)) != len(keys):
            raise ValueError("breakdown_by keys must be unique")
        return keys

    @field_validator("sentiment_from", mode="before")
    @classmethod
    def _a_plain_key(cls, value: object) -> object:
        # The plain-string form is the key alone. Checked here, so a bad key names params.sentiment_from as it
        # did before the object form existed (not params.sentiment_from.key).
        if isinstance(value, str):
            try:
                return {"key": _METADATA_KEY.validate_python(value)}
            except ValidationError as err:
                raise ValueError(err.errors(include_url=False)[0]["msg"]) from None
        return value

    @field_validator("sentiment")
    @classmethod
    def _sentiment_needs_llm(cls, value: str, info: ValidationInfo) -> str:
        # Here rather than in _check, so the 422 names params.sentiment (llm is declared, so validated, first).
        if value == "llm" and info.data.get("llm") == "off":
            raise ValueError("sentiment 'llm' needs llm 'auto' or 'required'")
        return value

    @field_validator("label_language")
    @classmethod
    def _label_language_needs_llm(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and info.data.get("llm") == "off":
            raise ValueError("label_language needs llm 'auto' or 'required': without an LLM, labels are "
                             "phrases taken from the responses, in their own language")
        return value

    def sentiment_scale(self) -> RatingRange | None:
        """The scale ``sentiment_from`` is read on: its own declaration, else (consist46) the range ``score`` declares
        when it names the same key (one key, one reading: a 1-10 score's key was read by the sentiment as the
        1-5 stars its answers happened to fit, its 5s positive where the score's scale makes them neutral); None:
        inferred from the values. Two declarations of one key that differ are a 422 at submission
        (validate.scale_conflict)."""
        if self.sentiment_from is None:
            return None
        if self.sentiment_from.scale is not None:
            return self.sentiment_from.scale
        if self.score is not None and self.score.key == self.sentiment_from.key:
            return SCORE_RANGE.get(self.score.scale)
        return None

    @model_validator(mode="after")
    def _check(self) -> ThematicParams:
        # ParamError: the 422 names the parameter (params.num_themes), not the whole params.
        if isinstance(self.num_themes, int) and not 1 <= self.num_themes <= (self.max_themes or 200):
            raise ParamError("num_themes", "num_themes must be 'auto' or between 1 and max_themes")
        if self.seed_themes is not None:
            names = [s.name.strip().lower() for s in self.seed_themes]
            if len(set(names)) != len(names):
                raise ParamError("seed_themes", "seed_themes names must be unique")
        if self.embedding == "quality" and self.language not in ("en", "auto"):
            raise ParamError(
                "embedding",
                "embedding 'quality' is English only; use language 'en' or 'auto', or embedding 'multilingual'",
            )
        return self
