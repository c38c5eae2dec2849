"""The result document of the thematic pipeline, as pydantic models (its JSON Schema is published from them).

``schema_version`` changes on any incompatible change. Run
``python -c "from pipelines.thematic.result import json_schema; print(json_schema())"``
to print the JSON Schema.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = "1.0"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Quote(_Model):
    response_id: str | int
    text: str


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


class ParentTheme(_Model):
    id: str
    label: str
    keywords: list[str]
    count: int
    children: list[str]


class ThemeRef(_Model):
    theme_id: str
    confidence: float


class SeedCode(_Model):
    name: str
    confidence: float
    coded_by: Literal["embedding", "llm"]


class AssignmentOut(_Model):
    response_id: str | int
    bucket: Literal["theme", "other", "unusable"]
    themes: list[ThemeRef]
    reason: str | None = Field(
        default=None, description="why unusable: empty, gibberish, exact_duplicate, near_duplicate"
    )
    duplicate_of: str | int | None = None
    seed_codes: list[SeedCode] | None = None


class SeedThemeOut(_Model):
    name: str
    description: str
    count: int
    share: float


class Choice(_Model):
    criterion: str
    explanation: str
    scores: list[dict[str, float]]


class Counts(_Model):
    responses: int
    usable: int
    themed: int
    other: int
    unusable: dict[str, int]
    pii_redacted: dict[str, int]


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
    llm: LLMInfo
    resumed_stages: list[str]


class ThematicResult(_Model):
    schema_version: Literal["1.0"]
    themes: list[Theme]
    parents: list[ParentTheme] = Field(default_factory=list)
    seed_themes: list[SeedThemeOut] | None = None
    assignments: list[AssignmentOut]
    run: RunInfo


def json_schema() -> str:
    return json.dumps(ThematicResult.model_json_schema(), indent=2)
