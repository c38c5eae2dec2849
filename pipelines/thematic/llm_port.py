"""The seam between this pipeline and the LLM client (``shared.llm.client``).

The pipeline only needs ``complete_json`` (and optionally ``embed``); coding
against this Protocol lets unit tests pass a fake client and keeps
``llm=off`` free of any LLM import. Prompt/response schemas live here too.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from shared.sdk import PermanentError

T = TypeVar("T", bound=BaseModel)


class ChatClient(Protocol):
    """What :class:`shared.llm.client.LLMClient` offers that we use."""

    @property
    def model_name(self) -> str: ...

    def complete_json(
        self, messages: list[dict[str, str]], schema: type[T], *, max_tokens: int = ..., purpose: str = ...
    ) -> Any: ...


class ThemeLabel(BaseModel):
    model_config = ConfigDict(extra="ignore")
    label: str = Field(min_length=1, max_length=60)
    description: str = Field(min_length=1, max_length=300)


class MergeGroups(BaseModel):
    """Theme ids that describe the same thing; each inner list becomes one theme."""

    model_config = ConfigDict(extra="ignore")
    merge: list[list[str]] = Field(default_factory=list)


class ResponseCodes(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: str
    codes: list[str] = Field(default_factory=list)


class CodingBatch(BaseModel):
    model_config = ConfigDict(extra="ignore")
    responses: list[ResponseCodes] = Field(default_factory=list)


def llm_errors() -> tuple[type[BaseException], ...]:
    """Errors after which the LLM step is skipped (the job goes on without it).

    Budget exhaustion and bad output are expected degradations; transient
    endpoint failures (``LLMError``) are NOT caught: the job is retried and,
    thanks to checkpoints and the LLM cache, pays nothing twice.
    """
    try:
        from shared.llm.client import LLMBadOutput, LLMBudgetExhausted
    except ImportError:  # pragma: no cover - the client is part of the platform
        return ()
    return (LLMBudgetExhausted, LLMBadOutput)


def resolve_client(mode: str) -> ChatClient | None:
    """The configured client for ``llm`` = off/auto/required."""
    if mode == "off":
        return None
    client: ChatClient | None
    try:
        from shared.llm.client import LLMClient

        client = LLMClient.from_settings()
    except ImportError:
        client = None
    if client is None and mode == "required":
        raise PermanentError("llm=required but no LLM provider is configured (LLM_PROVIDER=none)")
    return client


def llm_available() -> bool:
    """Whether a provider is configured, without building a client (used at submission)."""
    from shared.llm import llm_configured

    return llm_configured()
