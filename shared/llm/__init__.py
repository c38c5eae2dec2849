"""The LLM client pipelines use (``shared.llm.client``) and its response cache (``shared.llm.cache``)."""

from __future__ import annotations

from shared.config.settings import raw


def llm_configured() -> bool:
    """Whether a provider is configured, without building a client (used at submission)."""
    return raw("LLM_PROVIDER").strip().lower() not in ("", "none") and bool(raw("LLM_ENDPOINT").strip())
