"""Blob Storage for what does not fit in a table entity or a queue message (names: ``shared.core.names``).

Layout inside the results container, one folder per job so retention can
delete a job's blobs with one prefix listing::

    ~inputs/{YYYY-MM-DD}/{tenant}/{job_id}/input.json.gz   claim-checked input (large inputs only), by the day
                                             of its submission (platform45; the job row names it)
    {tenant}/{job_id}/input.json.gz          the same, as written before platform45
    ~retention/{time}-{id}.json              the jobs a retention lot is expiring (``Reaper._retention``)
    {tenant}/{job_id}/checkpoints/{name}     a stage's output, for resuming
    {tenant}/{job_id}/result-{attempt}.json  the result of the attempt that produced it
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from azure.storage.blob import ContainerClient, ContentSettings, PartialBatchErrorException

from shared.core.errors import CorruptInput, NotFound
from shared.core.names import checkpoint_blob_name, input_blob_name, job_prefix, result_blob_name
from shared.storage.connections import get_container_client
from shared.storage.errors import storage_call


def encode_input(value: Any) -> bytes:
    return gzip.compress(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode(), compresslevel=6)


def decode_input(data: bytes) -> Any:
    return json.loads(gzip.decompress(data))


def decode_stored_input(data: bytes, where: str) -> Any:
    """A job's stored input (``where``: in its row, in its blob); :class:`CorruptInput` if it does not decode.

    The one reader of stored inputs for the worker and the API alike, so corrupt storage is one domain error (the
    worker fails the job with it, the API answers 409 naming ``input``), never a BadGzipFile escaping as a 500.
    """
    try:
        return decode_input(data)
    except (OSError, EOFError, zlib.error, ValueError) as err:  # not gzip, cut short, not UTF-8 JSON
        raise CorruptInput(f"the job's stored input ({where}) does not decode as gzipped JSON "
                           f"({type(err).__name__})", field="input") from err


class BlobStore:
    def __init__(self, container: ContainerClient | None = None) -> None:
        self._container = container

    @property
    def container(self) -> ContainerClient:
        return self._container or get_container_client()

    def put(self, name: str, data: bytes, content_type: str = "application/octet-stream") -> None:
        with storage_call("write blob"):
            self.container.upload_blob(
                name, data, overwrite=True, content_settings=ContentSettings(content_type=content_type)
            )

    def get(self, name: str) -> bytes:
        with storage_call("read blob"):
            return self.container.download_blob(name).readall()

    def get_optional(self, name: str) -> bytes | None:
        try:
            return self.get(name)
        except NotFound:
            return None

    def delete_prefix(self, prefix: str, also: Iterable[str] = ()) -> int:
        """Delete every blob under ``prefix``; returns how many were listed.

        A blob already gone is deleted, as asked: a batch that committed and was answered 5xx comes back from the
        SDK's own retry with every sub-request 404 (``PartialBatchErrorException``), and a blob another delete took
        between the listing and the batch is the same. Until review44p either failed the call, so a retention
        expiry was an error of the daily sweep, which was then not recorded and ran again (every scan) 5 minutes
        later. Any other sub-request failure (a leased blob: 412) still raises. ``also``: blobs outside the prefix,
        deleted in the same batches (a job's dated input, platform45), whether or not they exist.
        """
        with storage_call("delete blobs"):
            names = [b.name for b in self.container.list_blobs(name_starts_with=prefix)]
            names += [n for n in dict.fromkeys(also) if n and not n.startswith(prefix)]
            for start in range(0, len(names), 256):
                # One batch request deletes up to 256 blobs.
                try:
                    self.container.delete_blobs(*names[start : start + 256])
                except PartialBatchErrorException as err:
                    if any(getattr(part, "status_code", None) not in (202, 404) for part in err.parts or [None]):
                        raise
        return len(names)

    def written(self, prefix: str | None = None) -> list[tuple[str, datetime]]:
        """Every blob's name and last write (under ``prefix``): one listing (a page per 5,000 blobs), for the
        reaper's daily sweep of orphaned blobs."""
        with storage_call("list blobs"):
            return [(b.name, b.last_modified) for b in self.container.list_blobs(name_starts_with=prefix)
                    if b.last_modified is not None]

    def size(self, name: str) -> int | None:
        """The blob's size, or None if there is none (one listing call)."""
        with storage_call("stat blob"):
            for blob in self.container.list_blobs(name_starts_with=name):
                if blob.name == name:
                    return int(blob.size)
        return None


__all__ = [
    "BlobStore",
    "checkpoint_blob_name",
    "decode_input",
    "decode_stored_input",
    "encode_input",
    "input_blob_name",
    "job_prefix",
    "result_blob_name",
]
