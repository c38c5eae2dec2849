"""Names and limits that more than one module needs, kept in one place."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Final

# Header that API Management sets from the caller's subscription. A value sent
# by the client is stripped by the gateway policy (infra/apim/policy.xml).
TENANT_HEADER: Final = "x-thematiq-tenant"
IDEMPOTENCY_HEADER: Final = "idempotency-key"

# Job ids are 28 lowercase hex digits: 12 of inverted milliseconds (so a
# partition lists newest first) and 16 random. The pattern is checked before an
# id gets anywhere near a storage call, which also rules out OData injection.
JOB_ID_RE: Final = re.compile(r"^[0-9a-f]{28}$")
# Tenants become PartitionKeys, which may not contain / \ # ? or control chars.
TENANT_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
IDEMPOTENCY_KEY_RE: Final = re.compile(r"^[\x21-\x7e]{1,200}$")
PIPELINE_NAME_RE: Final = re.compile(r"^[a-z][a-z0-9_-]{0,39}$")
# Map stage names end up in RowKeys and blob names.
STAGE_RE: Final = re.compile(r"^[a-z][a-z0-9_-]{0,39}$")

# Table entity layout. Jobs and their idempotency rows share the tenant's
# partition so that both are written in one entity-group transaction.
KIND_JOB: Final = "job"
KIND_IDEMPOTENCY: Final = "idem"
IDEMPOTENCY_ROW_PREFIX: Final = "~idem-"
# The active-jobs index (docs/architecture.md#the-reaper): one row per unfinished job beside the job row, written
# in the same transaction as the insert and removed in the same transaction as the write that finishes the job;
# and a small partition naming every tenant, so the reaper reads neither finished rows nor other partitions.
KIND_ACTIVE: Final = "active"
ACTIVE_ROW_PREFIX: Final = "~active-"
#: A tenant's job rows are its only RowKeys before this one (a job id is 28 hex digits; every other row of the
#: partition starts with ``~``; chunks live in partitions of their own), so ``RowKey lt '~'`` lists its jobs only.
JOB_ROWS_END: Final = "~"
KIND_TENANT: Final = "tenant"
#: Not a valid tenant (TENANT_RE starts with a letter or digit), so never a tenant's own partition.
TENANTS_PARTITION: Final = "~tenants"
#: The row of the tenants partition that says when the reaper last swept (never a tenant: it starts with ~).
SWEEP_ROW: Final = "~sweep"
KIND_SWEEP: Final = "sweep"
#: The busy tenants (platform45): a row ``~busy-{tenant}`` of the tenants partition for each tenant that may hold an
#: active-index row. Written (an upsert) after every write that adds an index row; removed by the reaper, conditional
#: on the ETag it read before it found the tenant's index empty. An index run reads only the rows from ``~`` on (the
#: sweep row and these), so its cost follows the tenants with work in flight, not every tenant that ever submitted.
KIND_BUSY: Final = "busy"
BUSY_ROW_PREFIX: Final = "~busy-"
#: How long a process trusts its own mark of a tenant (per table client, like the tenant row's): a write that adds an
#: index row within this time of the process's last mark upserts nothing, so a job's claim stays within the six
#: operations of a no-op job once the process has marked its tenant.
BUSY_MARK_CACHE_SECONDS: Final = 600
#: The reaper takes a tenant off only once its mark (``marked_at``, written by the marking process) is older than this:
#: longer than any process trusts its mark, with room for 15 minutes of clock skew between machines (BUSY_MARK_CACHE_SECONDS
#: plus three times the skew), so no write a cached mark covered can come after the reaper's look.
BUSY_STALE_SECONDS: Final = 3600
#: Job rows fetched per query by the reaper: ``PartitionKey eq`` and this many ``RowKey eq`` terms OR-ed stay
#: within the 15 comparisons the Table service allows in one $filter (Azurite and the fake allow more).
ACTIVE_ROWS_PER_QUERY: Final = 14
#: Service requests one ``GET /api/jobs`` may make to fill its page: a filtered query can come back short (the
#: service scans at most 1,000 rows per request), so a tenant with many jobs of other statuses needs several;
#: the bound keeps one API call's cost fixed, and the cursor goes on from where it stopped.
LIST_MAX_SERVICE_PAGES: Final = 5
#: How often the reaper also runs the full cross-partition sweep (retention, and anything the index cannot
#: name: rows written before it existed), whichever instance runs it (the marker is in the table).
REAPER_SWEEP_SECONDS: Final = 24 * 3600
#: A claim-checked input blob this old with no job row is an orphan the sweep deletes (an insert that failed
#: where the API could not tell, or an API that died between the blob and the row). Far longer than any insert
#: can stay in flight, so a submission still deciding is never robbed of its input.
ORPHAN_INPUT_AGE_SECONDS: Final = 3600
#: Jobs one retention journal names (``Reaper._retention``): a blob of about 80 bytes a job.
RETENTION_JOURNAL_JOBS: Final = 1000

# An Edm.Binary property holds at most 64 KiB; keep headroom for the rest of
# the entity. Inputs whose gzip is larger go to Blob Storage (claim check).
INLINE_INPUT_MAX_BYTES: Final = 48 * 1024
# A string property holds at most 64 KiB (32 K UTF-16 code units).
MAX_STRING_PROPERTY_CHARS: Final = 30_000
ERROR_MESSAGE_MAX_CHARS: Final = 2_000

# Queue messages carry ids only; the job itself is in Table Storage.
POISON_SUFFIX: Final = "-poison"

# The responses of a job, as the platform stores and serves them (``shared.api.inputs``): every metadata key is a
# column of the exports and a ``metadata[KEY]`` filter of ``GET /api/jobs/{id}/responses``, so a key is what that
# filter can name (1 to 200 characters, ``shared.api.responses``) and a heading can show; and a job has at most
# this many distinct keys, so an export has at most this many metadata columns (a survey export's columns fit:
# wide ones reach a few hundred).
MAX_METADATA_KEYS: Final = 1_000
MAX_METADATA_KEY_CHARS: Final = 200
#: Characters no name shows (the label rule of pipelines/thematic/params.py, which shared/ may not import; a test
#: compares the two): C0 and C1 controls (NUL, line breaks, tab, escapes), the Unicode line and paragraph
#: separators, and the bidirectional overrides and isolates. A metadata key and a response id may hold none.
INVISIBLE_IN_NAME: Final = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")

LIST_DEFAULT_LIMIT: Final = 50
LIST_MAX_LIMIT: Final = 200

PROBLEM_CONTENT_TYPE: Final = "application/problem+json"
PROBLEM_TYPE_BASE: Final = "https://thematiq.dev/problems/"

# The conditional-write primitive (shared.core.conditional): how many times a
# transition re-plans after losing to another writer, and how long it waits
# between re-reads when the storage answer to a write was lost.
CONDITIONAL_TRIES: Final = 8
#: First full-jitter pause after a conditional write lost to another writer; doubles each round up to the cap.
CONDITIONAL_BACKOFF_SECONDS: Final = 0.005
CONDITIONAL_BACKOFF_CAP_SECONDS: Final = 0.25
#: A cancel is a person's request and must not lose to a heartbeat: it keeps trying for a few seconds.
CANCEL_CONDITIONAL_TRIES: Final = 20
AMBIGUOUS_REREAD_DELAYS: Final = (0.2, 0.5, 1.0, 2.0)
# Sends that fail are retried this often before the work is left to the reaper
# (a duplicate message is harmless: every claim is conditional).
SEND_TRIES: Final = 3
SEND_RETRY_DELAY: Final = 0.2
# An attempt stops itself once its lease could not be renewed for this share of
# HEARTBEAT_STALE_SECONDS, so it is gone before the reaper hands the job on.
FENCE_FRACTION: Final = 0.6
# The reaper re-enqueues at most this many lost jobs per run, so a deep backlog
# can never turn into a flood of duplicate messages.
REAPER_MAX_REQUEUES_PER_RUN: Final = 100
# Queue insertion times come back with one-second resolution.
QUEUE_TIME_GRANULARITY: Final = timedelta(seconds=1)

#: The Table service's limit on one entity-group transaction's payload (besides its 100 operations). Azurite does not
#: enforce it; the fake does (``FakeTable.submit_transaction``).
TABLE_BATCH_MAX_BYTES: Final = 4 * 1024 * 1024
#: What the chunk store puts in one transaction at most, as it estimates the JSON it sends: room under the limit for
#: the multipart framing and the estimate's slack (review44j: 100 chunks of 48 KiB inline input are 6.4 MB of base64).
TABLE_BATCH_BUDGET_BYTES: Final = 3 * 1024 * 1024
