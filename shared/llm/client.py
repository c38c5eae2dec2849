"""The LLM provider layer: JSON completions and embeddings from Azure OpenAI or any OpenAI-compatible endpoint.

Callers are synchronous pipeline code in a worker child process. The transport is
the official ``openai`` package (``AzureOpenAI`` with an Entra ID token provider, or
``OpenAI`` for any compatible endpoint), imported on first use so that the function
host's cold start never pays for it; its own retries are off and ours apply.
It adds what the pipelines must not each reinvent:

* **Structured output.** :meth:`LLMClient.complete_json` asks for a JSON object
  (``response_format={"type": "json_object"}`` plus the pydantic JSON schema in
  the system prompt), validates it with the pydantic model, and on invalid JSON
  or a schema violation sends the error back once for a corrected answer.
* **Retries.** 429 honours ``retry-after-ms`` / ``Retry-After`` (seconds or an
  HTTP date); 408/5xx, timeouts and connection errors back off exponentially
  with jitter (:class:`shared.sdk.retry.RetryPolicy`). Other 4xx fail at once.
* **Token budget** per job (:class:`TokenBudget`): a call that could exceed it
  is refused *before* it is sent; actual usage is charged after.
* **Cache** of validated answers in Table Storage (:mod:`shared.llm.cache`):
  a hit sends nothing and charges nothing.
* **Cost** accounting from a small, approximate price table.

Logging carries model, purpose, status, tokens, latency and cache hits only;
never prompts, responses or keys. See ``docs/llm.md``.

Errors, and what the caller should do with them:

* :class:`LLMError` (a :class:`RetryableError`): the endpoint kept failing
  (429/5xx/timeouts) after the retries. Retrying the job later may work.
* :class:`LLMBadOutput` (a :class:`PermanentError`): the model's answer was
  invalid twice (or refused / filtered). At temperature 0 another attempt
  would most likely repeat it and pay again, so it is permanent; a pipeline
  should usually catch it and continue without that one LLM result.
* :class:`LLMRequestRejected` (a :class:`PermanentError`): the endpoint refused
  the request (400/401/403/404...): configuration or input, not a blip.
* :class:`LLMBudgetExhausted` (a plain :class:`ThematiqError`): the job's token
  budget is spent. Not a failure: stop the LLM stage and carry on without it.
"""

from __future__ import annotations

import email.utils
import json
import logging
import math
import random
import re
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final, Generic, Literal, TypeVar

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ValidationError

from shared.config.settings import raw
from shared.core.errors import PermanentError, RetryableError, ThematiqError
from shared.llm.cache import CachedResponse, LLMCache, cache_key
from shared.sdk.retry import RetryPolicy

if TYPE_CHECKING:
    from azure.core.credentials import TokenCredential

log = logging.getLogger(__name__)

T = TypeVar("T", bound=BaseModel)
Provider = Literal["azure", "openai"]

#: Scope of an Entra ID token for Azure OpenAI (Cognitive Services).
AZURE_SCOPE: Final = "https://cognitiveservices.azure.com/.default"
#: Default attempts per HTTP call (one try and four retries), first backoff 1 s, capped at 20 s.
DEFAULT_RETRY: Final = RetryPolicy(
    max_attempts=5, base_delay=timedelta(seconds=1), factor=2.0, max_delay=timedelta(seconds=20), jitter=0.5
)
#: A Retry-After longer than this is not slept through inside the call: the
#: call fails with LLMError (carrying ``retry_after``) and the job retries later.
MAX_RETRY_AFTER_SECONDS: Final = 60.0
#: Rough tokens per character for budget estimates (English averages ~4 chars per token).
CHARS_PER_TOKEN: Final = 4
#: Per-message overhead of the chat format, in tokens.
TOKENS_PER_MESSAGE: Final = 4
EMBED_BATCH: Final = 64
#: Deployment or model names of reasoning models (o1, o3, o4-mini, gpt-5…): ``max_completion_tokens``, no temperature.
REASONING_MODEL_RE: Final = re.compile(r"^(o\d|gpt-5)")

# USD per 1M tokens (input, output). APPROXIMATE list prices of the public
# OpenAI / Azure OpenAI "global standard" offers; regional, provisioned and
# negotiated prices differ. Used for the job's usage report, never for billing.
# Matched by longest prefix of the model name the endpoint reports (falling back
# to the deployment name); unknown models cost 0 and are logged once.
PRICES_PER_MTOK: Final[dict[str, tuple[float, float]]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4-turbo": (10.00, 30.00),
    "gpt-4": (30.00, 60.00),
    "gpt-35-turbo": (0.50, 1.50),
    "gpt-3.5-turbo": (0.50, 1.50),
    "o3-mini": (1.10, 4.40),
    "o4-mini": (1.10, 4.40),
    "text-embedding-3-small": (0.02, 0.0),
    "text-embedding-3-large": (0.13, 0.0),
    "text-embedding-ada-002": (0.10, 0.0),
}
_unpriced_logged: set[str] = set()


# -- Errors -------------------------------------------------------------------


class LLMError(RetryableError):
    """The endpoint kept failing (429, 5xx, timeouts, connection errors) after the retries."""

    def __init__(self, detail: str = "", *, retry_after: float | None = None, **extra: Any) -> None:
        super().__init__(detail, **extra)
        #: Seconds the endpoint asked us to wait, when it said so.
        self.retry_after = retry_after


class LLMBadOutput(PermanentError):
    """The model's answer was not valid for the schema, even after one repair attempt (or it refused)."""


class LLMRequestRejected(PermanentError):
    """The endpoint refused the request (4xx other than 408/429): wrong key, deployment, or input."""


class LLMBudgetExhausted(ThematiqError):
    """The job's token budget would be exceeded: stop the LLM stage and continue without it."""


# -- Values -------------------------------------------------------------------


@dataclass(frozen=True)
class Usage:
    """Tokens used and their approximate cost."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.cost_usd + other.cost_usd,
        )


@dataclass(frozen=True)
class LLMResult(Generic[T]):
    """A validated answer. ``usage`` is zero when ``cached`` (nothing was paid this time)."""

    value: T
    usage: Usage
    cached: bool


def price(model: str, prompt_tokens: int, completion_tokens: int) -> float:
    """Approximate USD cost of a call (see :data:`PRICES_PER_MTOK`); 0 for unknown models."""
    name = model.lower()
    best = max((p for p in PRICES_PER_MTOK if name.startswith(p)), key=len, default=None)
    if best is None:
        if name not in _unpriced_logged:
            _unpriced_logged.add(name)
            log.warning("llm no price for model=%s; its cost is counted as 0", model)
        return 0.0
    pin, pout = PRICES_PER_MTOK[best]
    return (prompt_tokens * pin + completion_tokens * pout) / 1_000_000


#: (tokens already used, token limit) for this pipeline process, set by the platform.
_allowance: tuple[int, int] | None = None


def set_job_allowance(used: int, limit: int) -> None:
    """Called by the pipeline process (``shared.runtime.child``) before the pipeline runs."""
    global _allowance
    _allowance = (max(0, used), max(0, limit))


def clear_job_allowance() -> None:
    """No allowance: a budget is ``LLM_MAX_TOKENS_PER_JOB`` alone (``shared.llm.reset_job_scope``)."""
    global _allowance
    _allowance = None


class TokenBudget:
    """Tokens one job may spend on LLM calls; thread-safe.

    :meth:`reserve` takes an estimate before a call and refuses with
    :class:`LLMBudgetExhausted` if it could overrun the limit; :meth:`settle`
    replaces the estimate with the real usage afterwards. ``used`` can be
    seeded with what earlier attempts of the same job already spent.
    """

    def __init__(self, limit: int, used: int = 0) -> None:
        self.limit = limit
        self._used = used
        self._reserved = 0
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, used: int | None = None) -> TokenBudget:
        """A budget of ``LLM_MAX_TOKENS_PER_JOB`` tokens, less what this job spent before this process.

        The budget is per job, but a job spends it across processes (retried
        attempts, resumed attempts, map-stage chunks): the platform tells each
        pipeline process its share through :func:`set_job_allowance`.
        """
        limit = int(raw("LLM_MAX_TOKENS_PER_JOB"))
        if _allowance is not None:
            limit = min(limit, _allowance[1])
            used = _allowance[0] if used is None else used
        return cls(limit, used or 0)

    @property
    def used(self) -> int:
        return self._used

    @property
    def remaining(self) -> int:
        with self._lock:
            return max(0, self.limit - self._used - self._reserved)

    def reserve(self, tokens: int, purpose: str = "") -> None:
        with self._lock:
            if self._used + self._reserved + tokens > self.limit:
                raise LLMBudgetExhausted(
                    f"token budget exhausted: {self._used} used of {self.limit}, next call needs up to {tokens}",
                    purpose=purpose,
                    used=self._used,
                    limit=self.limit,
                )
            self._reserved += tokens

    def settle(self, reserved: int, actual: int) -> None:
        with self._lock:
            self._reserved = max(0, self._reserved - reserved)
            self._used += actual


def estimate_tokens(messages: Sequence[Mapping[str, str]]) -> int:
    """Rough prompt size: ~4 characters per token plus the chat format's overhead."""
    chars = sum(len(m.get("content", "")) for m in messages)
    return math.ceil(chars / CHARS_PER_TOKEN) + TOKENS_PER_MESSAGE * len(messages)


def parse_retry_after(headers: Mapping[str, str] | Any, now: datetime | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or HTTP date), else None."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


class _InvalidOutput(Exception):
    """The answer did not parse or validate; ``summary`` is safe to send back to the model."""

    def __init__(self, summary: str) -> None:
        super().__init__(summary)
        self.summary = summary


_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


def _validate(content: str, schema: type[T]) -> T:
    # Some OpenAI-compatible servers wrap JSON mode output in a Markdown fence anyway.
    m = _FENCE.match(content)
    text = m.group(1) if m else content
    try:
        return schema.model_validate_json(text)
    except ValidationError as err:
        problems = [
            f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}"
            for e in err.errors(include_input=False, include_url=False)[:10]
        ]
        raise _InvalidOutput("; ".join(problems)) from None


# -- The client -----------------------------------------------------------------


class LLMClient:
    """A synchronous client for one chat deployment (and optionally one embeddings deployment).

    Build it with :meth:`from_settings` in pipeline code; the constructor is
    for tests and tools. One client per job: it owns the job's budget and
    usage totals. Thread-safe.
    """

    def __init__(
        self,
        *,
        provider: Provider,
        endpoint: str,
        deployment: str,
        api_key: str = "",
        api_version: str = "2024-10-21",
        embeddings_deployment: str = "",
        timeout: float = 60.0,
        cache: LLMCache | None = None,
        budget: TokenBudget | None = None,
        retry: RetryPolicy = DEFAULT_RETRY,
        credential: TokenCredential | None = None,
        max_retry_after: float = MAX_RETRY_AFTER_SECONDS,
        sleep: Callable[[float], None] = time.sleep,
        reasoning: bool | None = None,
    ) -> None:
        if provider not in ("azure", "openai"):
            raise ValueError(f"unknown LLM provider {provider!r}")
        if urllib.parse.urlsplit(endpoint).scheme not in ("http", "https"):
            raise ValueError("LLM endpoint must be an http(s) URL")
        self.provider: Provider = provider
        self.endpoint = endpoint.rstrip("/")
        self.deployment = deployment
        self.api_version = api_version
        self.embeddings_deployment = embeddings_deployment
        self.timeout = timeout
        self.cache = cache
        self.budget = budget
        self.retry = retry
        self.max_retry_after = max_retry_after
        self._api_key = api_key
        self._credential = credential
        self._token: tuple[str, float] | None = None  # (token, expires_on epoch seconds)
        self._sleep = sleep
        self._lock = threading.Lock()
        # A separate lock: fetching a token is network I/O and must not block usage reads.
        self._token_lock = threading.Lock()
        self._usage = Usage()
        #: Send ``max_completion_tokens`` and no ``temperature`` (o-series); by default from the model name.
        self.reasoning = is_reasoning_model(deployment) if reasoning is None else reasoning
        self._client: Any = None
        self._sdk_lock = threading.Lock()

    @classmethod
    def from_settings(
        cls,
        cache: LLMCache | None = None,
        budget: TokenBudget | None = None,
        *,
        retry: RetryPolicy | None = None,
    ) -> LLMClient | None:
        """The client configured by the ``LLM_*`` settings, or None when the LLM is off.

        ``cache`` defaults to :meth:`LLMCache.from_settings` (table
        ``LLM_CACHE_TABLE``; set it empty to disable caching) and ``budget``
        to a fresh :meth:`TokenBudget.from_settings`.
        """
        provider = raw("LLM_PROVIDER").strip().lower()
        endpoint = raw("LLM_ENDPOINT").strip()
        if provider in ("", "none") or not endpoint:
            return None
        if provider not in ("azure", "openai"):
            raise ValueError(f"LLM_PROVIDER must be none, azure or openai, not {provider!r}")
        return cls(
            provider=provider,  # type: ignore[arg-type]  # checked just above
            endpoint=endpoint,
            deployment=raw("LLM_DEPLOYMENT"),
            api_key=raw("LLM_API_KEY"),
            api_version=raw("LLM_API_VERSION"),
            embeddings_deployment=raw("LLM_EMBEDDINGS_DEPLOYMENT"),
            timeout=float(raw("LLM_TIMEOUT_SECONDS")),
            cache=cache if cache is not None else LLMCache.from_settings(),
            budget=budget if budget is not None else TokenBudget.from_settings(),
            retry=retry or DEFAULT_RETRY,
        )

    @property
    def model_name(self) -> str:
        """The deployment (Azure) or model (OpenAI-compatible) name used for chat."""
        return self.deployment

    @property
    def usage_total(self) -> Usage:
        """Everything this client has paid for (cache hits add nothing)."""
        with self._lock:
            return self._usage

    @property
    def embeddings_enabled(self) -> bool:
        return bool(self.embeddings_deployment)

    # -- Public calls ---------------------------------------------------------------

    def complete_json(
        self,
        messages: list[dict[str, str]],
        schema: type[T],
        *,
        max_tokens: int = 800,
        purpose: str = "",
        temperature: float = 0.0,
    ) -> LLMResult[T]:
        """Ask for a JSON object matching ``schema`` and return it validated.

        Raises :class:`LLMBudgetExhausted` before a call the budget cannot
        cover, :class:`LLMError` when the endpoint keeps failing,
        :class:`LLMBadOutput` when the answer is invalid even after one repair
        attempt, :class:`LLMRequestRejected` on a 4xx.
        """
        json_schema = schema.model_json_schema()
        key = cache_key(
            provider=self.provider,
            model=self.deployment,
            api_version=self.api_version if self.provider == "azure" else "",
            messages=messages,
            schema_name=schema.__name__,
            json_schema=json_schema,
            temperature=temperature,
            max_tokens=max_tokens,
        )
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                try:
                    value = _validate(hit.content, schema)
                except _InvalidOutput:
                    # Cannot normally happen (the key covers the schema); treat as a miss.
                    log.warning("llm cache entry invalid purpose=%s; calling the model", purpose)
                else:
                    log.info("llm chat model=%s purpose=%s cached=true", self.deployment, purpose)
                    return LLMResult(value=value, usage=Usage(), cached=True)

        convo = _with_schema_instruction(messages, schema.__name__, json_schema)
        content, model, usage = self._chat(convo, max_tokens, temperature, purpose)
        total = usage
        try:
            value = _validate(content, schema)
        except _InvalidOutput as first:
            log.warning("llm invalid output model=%s purpose=%s; asking once for a repair", self.deployment, purpose)
            repair = [
                *convo,
                {"role": "assistant", "content": content},
                {
                    "role": "user",
                    "content": (
                        "Your reply was not valid: " + first.summary + ". Reply again with only the corrected "
                        "JSON object, conforming exactly to the JSON schema given in the system message."
                    ),
                },
            ]
            content, model, usage = self._chat(repair, max_tokens, temperature, purpose + ":repair")
            total = total + usage
            try:
                value = _validate(content, schema)
            except _InvalidOutput as second:
                raise LLMBadOutput(
                    f"{schema.__name__} output invalid after one repair attempt: {second.summary}"[:500],
                    purpose=purpose,
                ) from None
        if self.cache is not None:
            self.cache.put(
                key,
                CachedResponse(content, model, total.prompt_tokens, total.completion_tokens),
                purpose=purpose,
            )
        return LLMResult(value=value, usage=total, cached=False)

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """Embeddings of ``texts`` as a float32 array of L2-normalised rows.

        Raises :class:`LLMError` when no embeddings deployment is configured
        (check :attr:`embeddings_enabled` first) and the same errors as
        :meth:`complete_json` otherwise. Not cached.
        """
        if not self.embeddings_deployment:
            raise LLMError("no embeddings deployment configured (LLM_EMBEDDINGS_DEPLOYMENT)")
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        rows: list[list[float]] = []
        for start in range(0, len(texts), EMBED_BATCH):
            # The API rejects empty strings; a single space embeds as "nothing".
            batch = [t if t.strip() else " " for t in texts[start : start + EMBED_BATCH]]
            estimate = math.ceil(sum(len(t) for t in batch) / CHARS_PER_TOKEN) + len(batch)
            body: dict[str, Any] = {"model": self.embeddings_deployment, "input": batch, "encoding_format": "float"}
            reserved = self._reserve(estimate, "embed")
            spent = 0
            try:
                payload, _ = self._post(body, "embed", "embed")
                data = sorted(payload["data"], key=lambda d: int(d["index"]))
                if len(data) != len(batch):
                    raise LLMError(f"embeddings: got {len(data)} vectors for {len(batch)} inputs")
                rows.extend([float(x) for x in d["embedding"]] for d in data)
                u = payload.get("usage") or {}
                spent = int(u.get("prompt_tokens") or u.get("total_tokens") or estimate)
            except (KeyError, TypeError, ValueError) as err:
                raise LLMError(f"embeddings: unexpected response shape ({type(err).__name__})") from None
            finally:
                self._settle(reserved, spent)
            model = str(payload.get("model") or self.embeddings_deployment)
            self._add_usage(Usage(spent, 0, _cost(model, self.embeddings_deployment, spent, 0)))
        out = np.asarray(rows, dtype=np.float32)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return (out / np.where(norms == 0, 1, norms)).astype(np.float32)

    # -- Internals --------------------------------------------------------------------

    def _reserve(self, tokens: int, purpose: str) -> int:
        if self.budget is None:
            return 0
        self.budget.reserve(tokens, purpose)
        return tokens

    def _settle(self, reserved: int, actual: int) -> None:
        if self.budget is not None:
            self.budget.settle(reserved, actual)

    def _add_usage(self, usage: Usage) -> None:
        with self._lock:
            self._usage = self._usage + usage

    def _chat(
        self, messages: list[dict[str, str]], max_tokens: int, temperature: float, purpose: str
    ) -> tuple[str, str, Usage]:
        """One chat completion (with HTTP retries): (content, model, usage).

        A deployment whose name did not say it is a reasoning model, and that refuses ``max_tokens`` or
        ``temperature`` (400 ``unsupported_parameter``/``unsupported_value``), is switched once and remembered.
        """
        try:
            return self._chat_once(messages, max_tokens, temperature, purpose)
        except LLMRequestRejected as err:
            if self.reasoning or err.extra.get("code") not in ("unsupported_parameter", "unsupported_value"):
                raise
            log.info("llm chat model=%s: a reasoning model; sending max_completion_tokens", self.deployment)
            self.reasoning = True
            return self._chat_once(messages, max_tokens, temperature, purpose)

    def _chat_once(
        self, messages: list[dict[str, str]], max_tokens: int, temperature: float, purpose: str
    ) -> tuple[str, str, Usage]:
        # For Azure the SDK routes by deployment: ``model`` is the deployment name.
        body: dict[str, Any] = {"model": self.deployment, "messages": messages,
                                "response_format": {"type": "json_object"}}
        if self.reasoning:
            # o-series: the limit includes the hidden reasoning tokens, and only the default temperature exists.
            body["max_completion_tokens"] = max_tokens
        else:
            body["max_tokens"] = max_tokens
            body["temperature"] = temperature
        reserved = self._reserve(estimate_tokens(messages) + max_tokens, purpose)
        spent = 0
        try:
            payload, latency = self._post(body, "chat", purpose)
            try:
                choice = payload["choices"][0]
                message = choice.get("message") or {}
                content = message.get("content")
                finish = choice.get("finish_reason")
                u = payload.get("usage") or {}
                model = str(payload.get("model") or self.deployment)
            except (KeyError, IndexError, TypeError, AttributeError) as err:
                raise LLMError(f"chat: unexpected response shape ({type(err).__name__})") from None
            # Some compatible servers omit usage: fall back to the estimate so the budget still moves.
            prompt_tokens = int(u.get("prompt_tokens") or estimate_tokens(messages))
            completion_tokens = int(u.get("completion_tokens") or math.ceil(len(content or "") / CHARS_PER_TOKEN))
            spent = prompt_tokens + completion_tokens
        finally:
            self._settle(reserved, spent)
        cost = _cost(model, self.deployment, prompt_tokens, completion_tokens)
        usage = Usage(prompt_tokens, completion_tokens, cost)
        self._add_usage(usage)
        log.info(
            "llm chat model=%s purpose=%s cached=false latency_ms=%d prompt_tokens=%d completion_tokens=%d "
            "finish=%s cost_usd=%.6f",
            model,
            purpose,
            latency * 1000,
            prompt_tokens,
            completion_tokens,
            finish,
            cost,
        )
        if message.get("refusal") or finish == "content_filter":
            raise LLMBadOutput(
                f"the model refused or the answer was filtered (finish_reason={finish})", purpose=purpose
            )
        return (content if isinstance(content, str) else ""), model, usage

    def _azure_token(self) -> str:
        with self._token_lock:
            # Refresh five minutes early so a token never expires mid-request.
            if self._token is not None and self._token[1] - 300 > time.time():
                return self._token[0]
            if self._credential is None:
                self._credential = _default_credential()
            try:
                tok = self._credential.get_token(AZURE_SCOPE)
            except Exception as err:  # noqa: BLE001 - azure-identity raises several unrelated types
                raise LLMError(f"could not get an Entra ID token for Azure OpenAI ({type(err).__name__})") from None
            self._token = (tok.token, float(tok.expires_on))
            return tok.token

    def _sdk(self) -> Any:
        """The official ``openai`` client (imported on first use: it costs about a second of start-up).

        Its own retries are off (``max_retries=0``): ours decide, so a long ``Retry-After`` becomes a job
        retry instead of a blocked worker, and every attempt is charged and logged the same way.
        """
        with self._sdk_lock:
            if self._client is None:
                import openai

                common: dict[str, Any] = {"max_retries": 0, "timeout": self.timeout}
                if self.provider == "azure":
                    auth: dict[str, Any] = (
                        {"api_key": self._api_key} if self._api_key else {"azure_ad_token_provider": self._azure_token}
                    )
                    self._client = openai.AzureOpenAI(
                        azure_endpoint=self.endpoint, api_version=self.api_version, **auth, **common
                    )
                else:
                    # Compatible servers without auth still need a non-empty key for the SDK.
                    self._client = openai.OpenAI(base_url=self.endpoint, api_key=self._api_key or "none", **common)
            return self._client

    def _send(self, kind: str, body: Mapping[str, Any]) -> dict[str, Any]:
        sdk = self._sdk()
        api = sdk.chat.completions if kind == "chat" else sdk.embeddings
        response = api.with_raw_response.create(**body)
        payload = json.loads(response.http_response.content)
        if not isinstance(payload, dict):
            raise ValueError("response is not a JSON object")
        return payload

    def _post(self, body: Mapping[str, Any], kind: str, purpose: str) -> tuple[dict[str, Any], float]:
        """One call through the SDK, with our retries; returns (parsed body, latency of the successful attempt)."""
        import openai

        attempt = 0
        while True:
            attempt += 1
            retry_after: float | None = None
            started = time.monotonic()
            try:
                payload = self._send(kind, body)
                return payload, time.monotonic() - started
            except openai.APIStatusError as err:
                status = err.status_code
                code = _error_code(err.response.content)
                if status not in (408, 429) and status < 500:
                    log.warning(
                        "llm %s rejected model=%s purpose=%s status=%d code=%s",
                        kind, self.deployment, purpose, status, code,
                    )
                    raise LLMRequestRejected(
                        f"{kind} request rejected: HTTP {status} ({code})", status_code=status, code=code
                    ) from None
                retry_after = parse_retry_after(err.response.headers)
                reason = f"HTTP {status}" + (f" ({code})" if code else "")
            except openai.APITimeoutError:
                reason = "TimeoutError"
            except openai.APIConnectionError as err:
                inner = err.__cause__
                reason = type(inner).__name__ if isinstance(inner, BaseException) else type(err).__name__
            except ValueError:
                # A 200 whose body is not JSON: a proxy or gateway page, worth another try.
                reason = "malformed response body"
            elapsed = time.monotonic() - started
            log.warning(
                "llm %s attempt %d/%d failed model=%s purpose=%s reason=%s elapsed_ms=%d",
                kind, attempt, self.retry.max_attempts, self.deployment, purpose, reason, elapsed * 1000,
            )
            if retry_after is not None and retry_after > self.max_retry_after:
                raise LLMError(f"{kind}: {reason}; endpoint asks to wait {retry_after:.0f} s", retry_after=retry_after)
            if attempt >= self.retry.max_attempts:
                raise LLMError(f"{kind}: {reason} after {attempt} attempts", retry_after=retry_after)
            if retry_after is not None:
                # Honour the server's wait; a little jitter spreads out clients that were throttled together.
                delay = retry_after * (1 + 0.1 * random.random())
            else:
                delay = self.retry.backoff(attempt).total_seconds()
            self._sleep(delay)


def _cost(model: str, deployment: str, prompt_tokens: int, completion_tokens: int) -> float:
    # Azure deployments have arbitrary names, but responses report the real model
    # ("gpt-4o-mini-2024-07-18"); price by that, else by the deployment name.
    if not any(model.lower().startswith(p) for p in PRICES_PER_MTOK):
        model = deployment
    return price(model, prompt_tokens, completion_tokens)


def _error_code(content: bytes) -> str:
    # Only the machine-readable code/type: error messages can quote keys or input.
    try:
        body = json.loads(content or b"{}")
        e = body.get("error") or {}
        return str(e.get("code") or e.get("type") or "")[:64]
    except Exception:  # noqa: BLE001 - any unreadable body just has no code
        return ""


def is_reasoning_model(name: str) -> bool:
    """o-series and GPT-5 models take ``max_completion_tokens`` and no ``temperature``."""
    return bool(REASONING_MODEL_RE.match(name.strip().lower()))


def _with_schema_instruction(
    messages: list[dict[str, str]], schema_name: str, json_schema: Mapping[str, Any]
) -> list[dict[str, str]]:
    """Messages with the JSON schema added to the system prompt.

    JSON mode needs the word "JSON" in the prompt and says nothing about the
    shape, so the schema goes into the system message. Strict ``json_schema``
    response formats are not used: pydantic schemas with defaults or optional
    fields are not strict-compatible and OpenAI-compatible servers differ.
    Appending to an existing leading system message (rather than adding a
    second one) keeps chat templates that allow only one system message happy.
    """
    instruction = (
        f"Respond with a single JSON object (no prose, no Markdown) that conforms to this JSON schema "
        f"named {schema_name}:\n{json.dumps(json_schema, separators=(',', ':'))}"
    )
    out = [dict(m) for m in messages]
    if out and out[0].get("role") == "system":
        out[0]["content"] = out[0].get("content", "") + "\n\n" + instruction
    else:
        out.insert(0, {"role": "system", "content": instruction})
    return out


def _default_credential() -> TokenCredential:
    # Imported lazily: azure.identity costs ~0.3 s of start-up and key-based runs never need it.
    # The app's managed identity settings (shared with Storage) pick the identity.
    from azure.identity import DefaultAzureCredential, ManagedIdentityCredential

    client_id = raw("AzureWebJobsStorage__clientId") or None
    if raw("AzureWebJobsStorage__credential").lower() == "managedidentity":
        return ManagedIdentityCredential(client_id=client_id)
    return DefaultAzureCredential(managed_identity_client_id=client_id)
