"""Where a job's blobs live, one folder per job so retention deletes them with one prefix listing::

    {tenant}/{job_id}/input.json.gz          claim-checked input (large inputs only)
    {tenant}/{job_id}/checkpoints/{name}     a stage's output, for resuming
    {tenant}/{job_id}/result-{attempt}.json  the result of the attempt that produced it
    {tenant}/{job_id}/chunks/{stage}/...     a map stage's chunk inputs and outputs
"""

from __future__ import annotations


def job_prefix(tenant: str, job_id: str) -> str:
    return f"{tenant}/{job_id}/"


#: The last part of a claim-checked input's blob name (how the sweep of orphaned inputs recognises one).
INPUT_BLOB_SUFFIX = "/input.json.gz"


def input_blob_name(tenant: str, job_id: str) -> str:
    return f"{tenant}/{job_id}{INPUT_BLOB_SUFFIX}"


def result_blob_name(tenant: str, job_id: str, attempt: int) -> str:
    # Keyed on job and attempt: a zombie attempt can never overwrite the result
    # that the job entity points at.
    return f"{job_prefix(tenant, job_id)}result-{attempt}.json"


def checkpoint_blob_name(tenant: str, job_id: str, name: str) -> str:
    return f"{job_prefix(tenant, job_id)}checkpoints/{name}"


def chunk_blob_name(tenant: str, job_id: str, stage: str, index: int, suffix: str) -> str:
    return f"{job_prefix(tenant, job_id)}chunks/{stage}/{index:05d}.{suffix}"
