"""``GET /api/jobs/{id}/responses``: the query (names, limit, cursor) and the page's ETag, pipeline-agnostic.

What a row holds and which filters exist is the pipeline's (``Pipeline.responses``, ``response_filters``);
this module checks the query's shape before anything but the job row is read, so a bad parameter costs one
read and a 304 costs one read.

Storage operations per page: the job row (1, which carries a small input and a small result inline), the result
blob when the result is not inline (0-1), the input blob when the input was claim-checked (0-1): at most 3,
whatever the job's size or the page's position, and only the row once this process has parsed that result
version (``shared.api.service._PARSED``). CPU for a 20,000-response job, measured under load: about 0.4 s for
the first page (parsing the result and the input), 50-70 ms for each later one (the filter over every row).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import BaseModel, Field

from shared.config.constants import MAX_METADATA_KEY_CHARS
from shared.core.errors import BadRequest, ValidationFailed
from shared.sdk.responses import ResponseQuery, ResponseRow

RESPONSES_DEFAULT_LIMIT = 100
RESPONSES_MAX_LIMIT = 500
MAX_FILTER_CHARS = 200
#: Bumped when a row's shape changes, so a client's cached page is never taken for the new one.
ROW_VERSION = "2"  # 2: the page carries `usable`
#: ``metadata[KEY]``: any key, ``metadata[]`` too (the key "", which a job submitted before input42 may hold; a new
#: one cannot: shared.api.inputs), up to the length a stored key may have.
_METADATA = re.compile(r"^metadata\[(.*)\]$", re.DOTALL)
_ALWAYS = frozenset({"limit", "cursor", "code"})


class ResponseList(BaseModel):
    """One page of a job's responses, in the order they were submitted."""

    items: list[ResponseRow]
    next_cursor: str | None = Field(description="Pass as `cursor` (with the same filters) for the next page; null on the last.")
    total: int = Field(description="How many responses of the job match the filters (unusable ones included, marked "
                                   "by their `bucket`).")
    usable: int | None = Field(default=None, description=(
        "How many of the matching responses are usable (bucket `theme` or `other`): the `n` a breakdown states "
        "for the same segment, and the denominator of its shares. Null for a pipeline without unusable responses."))


@dataclass(frozen=True)
class ParsedQuery:
    query: ResponseQuery
    #: Identifies the filters (not the position): a cursor carries it, so it is never used with other filters.
    fingerprint: str


def _fingerprint(filters: Mapping[str, str], metadata: Mapping[str, str]) -> str:
    canon = json.dumps([sorted(filters.items()), sorted(metadata.items())], separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()[:16]


def encode_cursor(start: int, fingerprint: str) -> str:
    raw = json.dumps({"s": start, "f": fingerprint}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(cursor: str, fingerprint: str) -> int:
    try:
        if len(cursor) > 200:
            raise ValueError("too long")
        token = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        start = token["s"] if isinstance(token, dict) and set(token) == {"s", "f"} else None
        if isinstance(start, bool) or not isinstance(start, int) or start < 0 or not isinstance(token["f"], str):
            raise ValueError("not a token")
    except (ValueError, KeyError, TypeError, binascii.Error, UnicodeDecodeError) as err:
        raise BadRequest("cursor is not a cursor this route issued", field="cursor") from err
    if token["f"] != fingerprint:
        raise BadRequest("cursor was issued for other filters: send the same filters, or start without it",
                         field="cursor")
    return start


def _invalid(field: str, message: str) -> ValidationFailed:
    return ValidationFailed(f"invalid query parameter {field}", [{"field": field, "message": message}])


def parse_query(params: Mapping[str, str], allowed: frozenset[str]) -> ParsedQuery:
    """Names, lengths, limit and cursor; the values of the pipeline's filters are the pipeline's to check."""
    filters: dict[str, str] = {}
    metadata: dict[str, str] = {}
    for name in sorted(params):
        value = params[name]
        if name in _ALWAYS:
            continue
        m = _METADATA.fullmatch(name)
        if name in allowed:
            target, key = filters, name
        elif m:
            target, key = metadata, m.group(1)
            if len(key) > MAX_METADATA_KEY_CHARS:
                raise _invalid(name[:60], f"a metadata key is at most {MAX_METADATA_KEY_CHARS} characters")
        else:
            known = ", ".join([*sorted(allowed), "metadata[KEY]", "limit", "cursor"])
            raise _invalid(name[:60], f"unknown query parameter; known: {known}")
        if not value or len(value) > MAX_FILTER_CHARS:
            raise _invalid(name[:60], f"1 to {MAX_FILTER_CHARS} characters")
        target[key] = value
    limit_text = params.get("limit") or str(RESPONSES_DEFAULT_LIMIT)
    # isascii(): str.isdigit() also accepts '²' or '٣'.
    if not (limit_text.isascii() and limit_text.isdigit()) or not 1 <= int(limit_text) <= RESPONSES_MAX_LIMIT:
        raise _invalid("limit", f"an integer from 1 to {RESPONSES_MAX_LIMIT}")
    fingerprint = _fingerprint(filters, metadata)
    cursor = params.get("cursor")
    start = _decode_cursor(cursor, fingerprint) if cursor else 0
    return ParsedQuery(ResponseQuery(filters, metadata, start, int(limit_text)), fingerprint)


def page_etag(result_etag: str, parsed: ParsedQuery) -> str:
    """Weak: the page is the same rows for the same result version, filters, position and limit (the input of a
    job never changes). Known before any blob is read, so a matching If-None-Match costs the row read only."""
    q = parsed.query
    key = f"{ROW_VERSION}|{result_etag}|{parsed.fingerprint}|{q.start}|{q.limit}"
    return 'W/"' + hashlib.sha256(key.encode("utf-8")).hexdigest()[:32] + '"'
