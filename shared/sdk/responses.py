"""Every response of a finished job with what the pipeline made of it: the rows of ``GET /api/jobs/{id}/responses``.

The platform reads the job's stored input and its result (each at most one storage read) and hands both to the
pipeline's :data:`ResponseLister`, which joins them and filters one page; the platform owns the tenant rules,
the cursor, the limits and the ETag. The row models live here, below both, so the API documents exactly what a
pipeline returns (``shared.api.openapi``) and pipelines need import nothing but the SDK.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class LevelLink(BaseModel):
    """The response's theme at one level of the hierarchy (broad: a parent or a theme; fine: a theme or sub-theme)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    label: str


class ThemeLink(BaseModel):
    """One theme a response was coded with."""

    model_config = ConfigDict(extra="forbid")

    theme_id: str
    label: str
    confidence: float = Field(description="Cosine similarity to the theme (0..1); the first theme is the primary one.")
    broad: LevelLink | None = Field(default=None, description=(
        "The broad theme this theme is in: its parent when the broad level is the parents (more than 12 themes), "
        "the theme itself when the themes are the broad level; null when it has none. The primary theme's is the "
        "row's `broad`; with multi_label each other theme's names the broad themes the response also counts in "
        "(as `theme=p1` lists it). New 2026-12-08."))


class RowSentiment(BaseModel):
    model_config = ConfigDict(extra="forbid")

    label: str = Field(description="positive, neutral or negative")
    score: float = Field(description="-1 (negative) .. 1 (positive)")


class ResponseRow(BaseModel):
    """A response as submitted (its text and metadata, from the job's stored input) with its coding."""

    model_config = ConfigDict(extra="forbid")

    id: str | int = Field(description="The id it was submitted with.")
    text: str = Field(description="The text as submitted (before cleaning or PII redaction).")
    metadata: dict[str, Any] = Field(description="The metadata it was submitted with ({} when none).")
    bucket: str = Field(description="`theme`, `other` (usable, in no theme) or `unusable`.")
    reason: str | None = Field(
        description="Why unusable: empty, no_answer, gibberish, exact_duplicate, near_duplicate. On a copy counted "
        "with its first copy (bucket theme or other, schema 1.4 count_duplicates): which kind of copy it is."
    )
    themes: list[ThemeLink] = Field(description="Its themes, primary first.")
    broad: LevelLink | None = Field(description="Broad-level theme of the primary theme.")
    fine: LevelLink | None = Field(description="Fine-level theme (a sub-theme); null when the theme has none.")
    sentiment: RowSentiment | None


@dataclass(frozen=True)
class ResponseQuery:
    """One page's worth of filters, already checked by the platform for names (not values)."""

    #: The pipeline's own filters (``Pipeline.response_filters``), e.g. ``{"theme": "t3"}``.
    filters: Mapping[str, str]
    #: ``metadata[key]=value`` conditions; every one must match.
    metadata: Mapping[str, str]
    #: Position in the stored input to start at (0 for the first page).
    start: int
    limit: int


@dataclass(frozen=True)
class ResponsePage:
    items: list[ResponseRow]
    #: Input position the next page starts at; None on the last page (no further row matches).
    next_start: int | None
    #: How many responses of the whole job match the filters.
    total: int
    #: How many of those the analysis counted (thematic: not ``unusable``), the ``n`` its breakdowns state for
    #: the same segment; None for a pipeline with no such notion. ``total`` keeps the unusable rows (marked by
    #: their bucket) so a researcher can still read them.
    usable: int | None = None


#: ``lister(result, input, query)``: one page of rows, in input order. Raise
#: :class:`shared.sdk.errors.ValidationFailed` naming the query parameter whose value does not fit (an unknown
#: theme id, a metadata key no response has).
ResponseLister = Callable[[dict[str, Any], Any, ResponseQuery], ResponsePage]

#: ``exporter(result, input)``: a download that needs the responses' texts and metadata beside the result
#: (``GET …/result?format=csv``): returns (content type, body).
Exporter = Callable[[dict[str, Any], Any], tuple[str, bytes]]
