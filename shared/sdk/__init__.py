"""What a pipeline may import from the platform: the plugin contract, its errors and signals.

Pipelines import this package (and ``shared.llm`` for the LLM client) and nothing
else of ``shared``; an import-linter contract in ``pyproject.toml`` holds that.
"""

from shared.sdk.errors import (
    Cancelled,
    ParamError,
    PermanentError,
    PipelineError,
    RetryableError,
    ThematiqError,
    ValidationFailed,
)
from shared.sdk.fanout_types import MapResult, Suspend
from shared.sdk.pipeline import EarlierResults, Pipeline, PipelineContext, Renderer, ResultEditor
from shared.sdk.responses import (
    Exporter,
    LevelLink,
    ResponseLister,
    ResponsePage,
    ResponseQuery,
    ResponseRow,
    RowSentiment,
    ThemeLink,
)
from shared.sdk.retry import RetryPolicy

__all__ = [
    "Cancelled",
    "EarlierResults",
    "Exporter",
    "LevelLink",
    "MapResult",
    "ParamError",
    "PermanentError",
    "Pipeline",
    "PipelineContext",
    "PipelineError",
    "Renderer",
    "ResponseLister",
    "ResponsePage",
    "ResponseQuery",
    "ResponseRow",
    "ResultEditor",
    "RetryPolicy",
    "RetryableError",
    "RowSentiment",
    "Suspend",
    "ThematiqError",
    "ThemeLink",
    "ValidationFailed",
]
