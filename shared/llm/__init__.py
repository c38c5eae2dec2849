"""The LLM client pipelines use (``shared.llm.client``) and its response cache (``shared.llm.cache``)."""

from __future__ import annotations

from shared.config.settings import raw


def llm_configured() -> bool:
    """Whether a provider is configured, without building a client (used at submission)."""
    return raw("LLM_PROVIDER").strip().lower() not in ("", "none") and bool(raw("LLM_ENDPOINT").strip())


def scope_to_job(tenant: str, tokens_used: int, token_limit: int | None) -> None:
    """This process runs one attempt of one job: the two process-wide LLM settings it needs, set in one place.

    The token budget spans the job's processes (retries, resumes, map chunks), so this process may spend what the
    job has left (``token_limit`` None: no cap but ``LLM_MAX_TOKENS_PER_JOB``); and the response cache is scoped
    to the tenant, so a cached answer is never served to, or probed by, another tenant. The attempt's process
    (``shared.runtime.child``) calls it before the pipeline runs; :func:`reset_job_scope` undoes it.
    """
    from shared.llm.cache import set_cache_scope
    from shared.llm.client import set_job_allowance

    set_job_allowance(tokens_used, token_limit if token_limit is not None else 1 << 62)
    set_cache_scope(tenant)


def reset_job_scope() -> None:
    """Back to a process that runs no attempt (the host, or the next test): no allowance, the cache scoped by the
    job's log context."""
    from shared.llm.cache import set_cache_scope
    from shared.llm.client import clear_job_allowance

    clear_job_allowance()
    set_cache_scope(None)
