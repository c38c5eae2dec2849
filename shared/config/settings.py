"""Every app setting the code reads, with its default and meaning.

This module is the single source of truth: ``tests/unit/infra/test_settings_agree.py``
checks that ``local.settings.sample.json``, the Bicep app settings and the
README's table cover every entry of :data:`SETTINGS`. Nothing else in the code
reads ``os.environ`` for configuration.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from shared.config.constants import FENCE_FRACTION


@dataclass(frozen=True)
class Setting:
    name: str
    default: str
    meaning: str
    #: Where the setting comes from in Azure: "app" (app settings in Bicep),
    #: "platform" (set by Azure itself) or "secret" (a Key Vault reference or
    #: left empty when managed identity is used).
    source: str = "app"


SETTINGS: Final[tuple[Setting, ...]] = (
    Setting(
        "AzureWebJobsStorage",
        "",
        "Storage connection string. Local only (`UseDevelopmentStorage=true`); in Azure use the identity-based `AzureWebJobsStorage__*` settings instead.",
        "secret",
    ),
    Setting(
        "AzureWebJobsStorage__accountName", "", "Storage account name for identity-based access (managed identity)."
    ),
    Setting(
        "AzureWebJobsStorage__credential",
        "",
        "`managedidentity` to use the app's managed identity; empty for DefaultAzureCredential.",
    ),
    Setting("AzureWebJobsStorage__clientId", "", "Client id of the user-assigned managed identity."),
    Setting("AzureWebJobsStorage__blobServiceUri", "", "Blob endpoint; derived from the account name when empty."),
    Setting("AzureWebJobsStorage__queueServiceUri", "", "Queue endpoint; derived from the account name when empty."),
    Setting("AzureWebJobsStorage__tableServiceUri", "", "Table endpoint; derived from the account name when empty."),
    Setting("JOBS_TABLE", "jobs", "Table that holds job entities (one partition per tenant)."),
    Setting(
        "JOBS_QUEUE", "jobs", "Queue the worker listens on; failures past maxDequeueCount go to `<JOBS_QUEUE>-poison`."
    ),
    Setting("RESULTS_CONTAINER", "thematiq", "Blob container for large inputs, checkpoints and results."),
    Setting(
        "DEFAULT_TENANT",
        "",
        "Tenant used when the trusted tenant header is absent. Set it locally (`local`); leave it empty behind API Management so that a missing header is refused.",
    ),
    Setting(
        "TRUSTED_GATEWAY_PRINCIPAL_ID",
        "",
        "Object id of API Management's managed identity. When set, every route but health serves only requests that App Service Authentication vouches for as that identity (`X-MS-CLIENT-PRINCIPAL-ID`); only those may name a tenant or set `X-Forwarded-*` (docs/security.md).",
    ),
    Setting(
        "HTTP_AUTH_LEVEL",
        "function",
        "Auth level of the HTTP routes: `function` (a function key; local) or `anonymous` (Azure: App Service Authentication admits only API Management, and the app checks it; needs `TRUSTED_GATEWAY_PRINCIPAL_ID`).",
    ),
    Setting(
        "PUBLIC_BASE_URL",
        "",
        "Base URL clients use, e.g. `https://<apim>.azure-api.net/thematiq`; `Location` and links are built on it. Empty: the trusted gateway's `X-Forwarded-Host`/`-Proto`/`-Prefix`, else `/api`.",
    ),
    Setting(
        "WEBSITE_AUTH_ENABLED",
        "",
        "Set by App Service when App Service Authentication is on (`True`). With `TRUSTED_GATEWAY_PRINCIPAL_ID` set and this not `True`, every request is refused.",
        "platform",
    ),
    Setting("MAX_INPUT_BYTES", "26214400", "Largest accepted request body in bytes (413 above it)."),
    Setting(
        "HEARTBEAT_SECONDS", "15",
        "How often a running job's heartbeat is renewed. Must be below 0.6 × `HEARTBEAT_STALE_SECONDS` (the "
        "self-fencing point); other values are refused when the settings are read.",
    ),
    Setting("HEARTBEAT_STALE_SECONDS", "120", "A running job whose heartbeat is older than this is reaped."),
    Setting(
        "QUEUED_STALE_SECONDS",
        "900",
        "A queued or retrying job not started this long after it became due is re-enqueued (its message was lost).",
    ),
    Setting("PROGRESS_MIN_INTERVAL_SECONDS", "3", "Progress is written to the job at most once per this many seconds."),
    Setting(
        "DISABLED_PIPELINES",
        "",
        "Comma-separated pipelines this deployment refuses (422 at submission). Azure disables the test pipelines `echo,sleep,fanout`.",
    ),
    Setting(
        "CHUNKS_QUEUE",
        "chunks",
        "Queue of map-stage chunks (fan-out); failures past maxDequeueCount go to `<CHUNKS_QUEUE>-poison`.",
    ),
    Setting(
        "MAX_CHUNKS_IN_FLIGHT_PER_JOB",
        "8",
        "At most this many chunks of one job are queued or running at once, so one large job cannot starve the others.",
    ),
    Setting(
        "CHUNK_ROWS",
        "job",
        "Where new chunk rows go: `job` (a partition per job, `{tenant}~{job_id}`) or `tenant` (the layout before 2026-12-07: the tenant's partition, after the job's row). Readers take both either way. Deploy this version first with `tenant` where instances of the code before may still run beside it (they read only that layout), then set `job`; the daily sweep moves `tenant` rows into job partitions, not while `tenant` is set (docs/scaling.md).",
    ),
    Setting(
        "CALLBACKS_QUEUE",
        "callbacks",
        "Queue of completion-webhook deliveries (docs/webhooks.md); retried with backoff for 24 h, then a dead letter on the job.",
    ),
    Setting(
        "WEBHOOK_SECRET",
        "",
        "The default tenant's first webhook signing secret (id `deployment`) until it rotates; every other tenant creates its own with `POST /api/webhooks/secrets` (docs/webhooks.md). A Key Vault reference in Azure.",
        "secret",
    ),
    Setting(
        "WEBHOOK_SECRETS_KEY",
        "",
        "Key that seals (envelope-encrypts) the tenants' webhook signing secrets in the table. A Key Vault reference in Azure (`infra/app/keyvault.bicep`); empty locally: a public development key.",
        "secret",
    ),
    Setting(
        "WEBHOOK_SECRETS_KEY_PREVIOUS",
        "",
        "The key before a rotation of `WEBHOOK_SECRETS_KEY`: rows it sealed still open, and are sealed with the new key when next written. A Key Vault reference in Azure, set only during a rotation.",
        "secret",
    ),
    Setting(
        "WEBHOOK_ALLOW_PRIVATE",
        "false",
        "`true` accepts http:// and private, loopback or link-local webhook URLs. Local development only: it turns off the SSRF checks.",
    ),
    Setting(
        "CANCEL_GRACE_SECONDS", "10", "How long a running pipeline may take to stop cooperatively before it is killed."
    ),
    Setting(
        "REAPER_SCHEDULE",
        "0 */5 * * * *",
        "NCRONTAB schedule of the reaper and retention timer (every 5 minutes: 288 wake-ups a day; active jobs come from an index, not a scan).",
    ),
    Setting(
        "ATTEMPT_PROCESS",
        "fork",
        "How an attempt's process starts: `fork` (a fresh fork of a warm zygote per host; Linux) or `spawn` (a fresh interpreter per attempt).",
    ),
    Setting(
        "INSTANCE_MEMORY_MB",
        "2048",
        "Memory of one instance (the Flex Consumption instance size: 2048 or 4096). Attempts are admitted while their declared estimates fit in it minus `MEMORY_MARGIN_MB`.",
    ),
    Setting(
        "MEMORY_MARGIN_MB",
        "512",
        "Memory kept for the host, the zygote and estimation error; attempts may use `INSTANCE_MEMORY_MB` minus this.",
    ),
    Setting(
        "DEFAULT_ATTEMPT_MEMORY_MB",
        "128",
        "Memory estimate of an attempt whose pipeline declares none.",
    ),
    Setting(
        "ADMISSION_DELAY_SECONDS",
        "5",
        "A message whose attempt does not fit in memory now is sent again, invisible for this long (no dequeue is burnt).",
    ),
    Setting(
        "RETENTION_DAYS",
        "30",
        "Finished jobs and their blobs are deleted this many days after they finish (0 keeps them).",
    ),
    Setting(
        "PIPELINE_TIMEOUT_SECONDS",
        "1500",
        "Upper bound on one pipeline attempt; a pipeline may declare a shorter one. Keep it below host.json functionTimeout.",
    ),
    Setting("LLM_PROVIDER", "none", "`none`, `azure` (Azure OpenAI) or `openai` (any OpenAI-compatible endpoint)."),
    Setting("LLM_ENDPOINT", "", "Base URL of the LLM endpoint."),
    Setting(
        "LLM_API_KEY",
        "",
        "API key for an OpenAI-compatible endpoint. Not needed for Azure OpenAI with managed identity.",
        "secret",
    ),
    Setting("LLM_DEPLOYMENT", "", "Azure OpenAI deployment name, or the model name for an OpenAI-compatible endpoint."),
    Setting("LLM_API_VERSION", "2024-10-21", "Azure OpenAI REST API version."),
    Setting(
        "LLM_EMBEDDINGS_DEPLOYMENT",
        "",
        "Embeddings deployment/model on the LLM endpoint; empty uses the embedded ONNX model.",
    ),
    Setting(
        "LLM_CACHE_TABLE",
        "llmcache",
        "Table that caches LLM responses per tenant, by hash of tenant + model + prompt, so a retried job does not pay twice; rows expire with `RETENTION_DAYS`.",
    ),
    Setting("LLM_TIMEOUT_SECONDS", "60", "Timeout of one LLM call."),
    Setting(
        "TENANT_MAX_IN_FLIGHT",
        "0",
        "Per-tenant fairness window: at most this many of one tenant's jobs in the jobs queue or running; later submissions are stored `queued` and parked until one ends (docs/architecture.md). Set it to what the app runs at once (instances × (`batchSize` + `newBatchThreshold`)); 0 turns it off (the local default; `infra/` deploys 10, the Bicep parameter `tenantMaxInFlight`).",
    ),
    Setting(
        "LLM_MAX_TOKENS_PER_JOB", "200000", "Token budget of one job; the LLM stage stops cleanly when it is spent."
    ),
    Setting(
        "APPLICATIONINSIGHTS_CONNECTION_STRING",
        "",
        "Sends logs, traces and metrics to Application Insights when set.",
        "platform",
    ),
)

_BY_NAME: Final = {s.name: s for s in SETTINGS}


def raw(name: str) -> str:
    """The setting's value from the environment, or its documented default."""
    return os.environ.get(name, _BY_NAME[name].default)


#: How App Service presents a Key Vault (or App Configuration) reference it could not resolve: as the setting's
#: value, the reference text itself ("If a reference isn't resolved properly, the reference string is used
#: instead", Microsoft Learn, "Use Key Vault references as app settings"). The text names the vault and the
#: secret, both in the template: as a key or a signing secret it is public.
_UNRESOLVED_REFERENCE: Final = re.compile(r"\s*@Microsoft\.(?:KeyVault|AppConfiguration)\(", re.IGNORECASE)


class UnresolvedSecret(RuntimeError):
    """A secret setting holds a reference the platform did not resolve: refused, never used as the secret."""


def secret(name: str) -> str:
    """A secret setting's value (``raw``), or :class:`UnresolvedSecret` if it is an unresolved reference.

    Fails closed: webhook secrets are then neither sealed nor opened, and no delivery is signed, until the
    reference resolves (the app's identity needs "get" on the vault's secrets; docs/deploy.md).
    """
    value = raw(name)
    if _UNRESOLVED_REFERENCE.match(value):
        raise UnresolvedSecret(f"{name} is a Key Vault reference App Service did not resolve: not used as a secret")
    return value


class Settings(BaseModel):
    """Typed view of the settings above, validated once per process."""

    model_config = ConfigDict(frozen=True)

    jobs_table: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9]{2,62}$")
    jobs_queue: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{1,53}[a-z0-9]$")
    chunks_queue: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{1,53}[a-z0-9]$")
    max_chunks_in_flight_per_job: int = Field(ge=1, le=1000)
    chunk_rows: Literal["job", "tenant"] = "job"
    callbacks_queue: str = Field(default="callbacks", pattern=r"^[a-z0-9][a-z0-9-]{1,53}[a-z0-9]$")
    webhook_allow_private: bool = False
    results_container: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$")
    default_tenant: str
    max_input_bytes: int = Field(gt=0)
    heartbeat_seconds: float = Field(gt=0)
    heartbeat_stale_seconds: float = Field(gt=0)
    queued_stale_seconds: float = Field(gt=0)
    progress_min_interval_seconds: float = Field(ge=0)
    cancel_grace_seconds: float = Field(ge=0)
    retention_days: float = Field(ge=0)
    pipeline_timeout_seconds: float = Field(gt=0)
    llm_max_tokens_per_job: int = Field(ge=0)
    attempt_process: Literal["fork", "spawn"] = "fork"
    instance_memory_mb: float = Field(default=2048, gt=0)
    memory_margin_mb: float = Field(default=512, ge=0)
    default_attempt_memory_mb: float = Field(default=128, ge=0)
    admission_delay_seconds: float = Field(default=5, ge=1)

    @model_validator(mode="after")
    def _heartbeat_inside_the_fence(self) -> Settings:
        # An attempt fences itself (kills its pipeline, reports the claim lost) once its lease went unrenewed for
        # FENCE_FRACTION of the stale threshold. A heartbeat at or past that point fences every attempt between two
        # healthy renewals, and one at or past the threshold itself lets the reaper reap live attempts.
        fence = FENCE_FRACTION * self.heartbeat_stale_seconds
        if self.heartbeat_seconds >= fence:
            raise ValueError(
                f"HEARTBEAT_SECONDS ({self.heartbeat_seconds:g}) must be below {FENCE_FRACTION:g} x "
                f"HEARTBEAT_STALE_SECONDS ({self.heartbeat_stale_seconds:g}) = {fence:g} s: at or above it an attempt "
                "fences itself between two renewals, and at or above HEARTBEAT_STALE_SECONDS the reaper reaps "
                "attempts that are alive"
            )
        return self

    @property
    def poison_queue(self) -> str:
        return self.jobs_queue + "-poison"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Settings of this process. Tests that change the environment call ``get_settings.cache_clear()``."""
    return Settings(
        jobs_table=raw("JOBS_TABLE"),
        jobs_queue=raw("JOBS_QUEUE"),
        chunks_queue=raw("CHUNKS_QUEUE"),
        max_chunks_in_flight_per_job=int(raw("MAX_CHUNKS_IN_FLIGHT_PER_JOB")),
        chunk_rows=raw("CHUNK_ROWS").strip().lower() or "job",  # type: ignore[arg-type]
        callbacks_queue=raw("CALLBACKS_QUEUE"),
        webhook_allow_private=raw("WEBHOOK_ALLOW_PRIVATE").strip().lower() in ("1", "true", "yes"),
        results_container=raw("RESULTS_CONTAINER"),
        default_tenant=raw("DEFAULT_TENANT"),
        max_input_bytes=int(raw("MAX_INPUT_BYTES")),
        heartbeat_seconds=float(raw("HEARTBEAT_SECONDS")),
        heartbeat_stale_seconds=float(raw("HEARTBEAT_STALE_SECONDS")),
        queued_stale_seconds=float(raw("QUEUED_STALE_SECONDS")),
        progress_min_interval_seconds=float(raw("PROGRESS_MIN_INTERVAL_SECONDS")),
        cancel_grace_seconds=float(raw("CANCEL_GRACE_SECONDS")),
        retention_days=float(raw("RETENTION_DAYS")),
        pipeline_timeout_seconds=float(raw("PIPELINE_TIMEOUT_SECONDS")),
        llm_max_tokens_per_job=int(raw("LLM_MAX_TOKENS_PER_JOB")),
        attempt_process=raw("ATTEMPT_PROCESS").strip().lower() or "fork",  # type: ignore[arg-type]
        instance_memory_mb=float(raw("INSTANCE_MEMORY_MB")),
        memory_margin_mb=float(raw("MEMORY_MARGIN_MB")),
        default_attempt_memory_mb=float(raw("DEFAULT_ATTEMPT_MEMORY_MB")),
        admission_delay_seconds=float(raw("ADMISSION_DELAY_SECONDS")),
    )


def markdown_table() -> str:
    """The README's settings table (``python -m shared.config.settings`` prints it)."""
    rows = ["| name | default | meaning |", "|---|---|---|"]
    for s in SETTINGS:
        default = f"`{s.default}`" if s.default else "(empty)"
        rows.append(f"| `{s.name}` | {default} | {s.meaning} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown_table())
