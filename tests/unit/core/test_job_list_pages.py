"""GET /api/jobs's storage side (JobStore.list): a filtered listing fills its page across the short or empty
service pages a filtered Table query can return, within a fixed number of service requests per call. On the
fake with a scan budget (the real service's 1,000 rows per request), and on Azurite, whose pages are full."""

from __future__ import annotations

import base64
import json

import pytest

from shared.config.constants import LIST_MAX_SERVICE_PAGES
from shared.core.errors import BadRequest
from shared.core.lifecycle import Lifecycle
from shared.storage.job_store import decode_cursor, encode_cursor
from tests.support.backends import Backend
from tests.support.scenarios import TENANT, job, submit


def _queries(b: Backend) -> int:
    return b.fake.ops()["table:query"] if b.fake is not None else 0


def test_a_filtered_list_fills_its_page_across_short_service_pages(backend: Backend) -> None:
    ids = [submit(backend).job.id for _ in range(9)]
    life = Lifecycle(backend.stores)
    cancelled = ids[::3]
    for job_id in cancelled:
        life.cancel(job(backend, job_id))
    if backend.fake is not None:
        backend.fake.rows_per_scan = 2  # each request looks at 2 rows: many pages come back short or empty
    seen: list[str] = []
    cursor: str | None = None
    for _ in range(10):
        before = _queries(backend)
        page, cursor = backend.stores.jobs.list(TENANT, status="cancelled", pipeline=None, limit=2, cursor=cursor)
        assert _queries(backend) - before <= LIST_MAX_SERVICE_PAGES
        if not seen:
            assert len(page) == 2  # not the first service page's nothing-yet
        seen += [j.id for j in page]
        if cursor is None:
            break
    assert seen == sorted(cancelled)  # newest first, each once, none missing


def test_a_list_stops_after_its_request_budget_and_goes_on_from_its_cursor(backend: Backend) -> None:
    if backend.fake is None:
        pytest.skip("Azurite's pages are full: only the fake can make every page short")
    ids = [submit(backend).job.id for _ in range(8)]
    life = Lifecycle(backend.stores)
    life.cancel(job(backend, ids[0]))  # the oldest: the last row of the partition's job rows
    backend.fake.rows_per_scan = 1
    before = _queries(backend)
    page, cursor = backend.stores.jobs.list(TENANT, status="cancelled", pipeline=None, limit=5, cursor=None)
    assert _queries(backend) - before == LIST_MAX_SERVICE_PAGES and page == [] and cursor is not None
    page, cursor = backend.stores.jobs.list(TENANT, status="cancelled", pipeline=None, limit=5, cursor=cursor)
    assert [j.id for j in page] == [ids[0]]


def _cursor(token: dict[str, str | None]) -> str:
    return base64.urlsafe_b64encode(json.dumps(token).encode()).decode().rstrip("=")


@pytest.mark.parametrize("token", [
    {}, {"PartitionKey": ""}, {"PartitionKey": "bG9jYWw=", "RowKey": ""}, {"PartitionKey": "a\nb"},
    {"PartitionKey": "caf\u00e9"}, {"PartitionKey": "x" * 1025}, {"NextPartitionKey": "bG9jYWw="},
], ids=["empty", "empty-partition", "empty-row", "control-char", "non-ascii", "too-long", "unknown-key"])
def test_a_cursor_no_listing_issued_is_a_400_naming_cursor_before_any_request(backend: Backend,
                                                                              token: dict[str, str]) -> None:
    submit(backend)
    before = _queries(backend)
    with pytest.raises(BadRequest) as caught:
        backend.stores.jobs.list(TENANT, status=None, pipeline=None, limit=2, cursor=_cursor(token))
    assert caught.value.extra.get("field") == "cursor"
    assert _queries(backend) == before


def test_a_cursor_the_service_refuses_is_a_400_naming_cursor_never_a_storage_error(backend: Backend) -> None:
    # Well-formed for us, but no continuation the service issued. Azure answers such a NextPartitionKey with
    # 400 InvalidInput (so does the fake); Azurite reads it as a position. Either way: never a 500.
    submit(backend)
    for token in ({"PartitionKey": "not-base64!", "RowKey": "x"}, {"RowKey": "%%%"}):
        try:
            page, _ = backend.stores.jobs.list(TENANT, status=None, pipeline=None, limit=2, cursor=_cursor(token))
        except BadRequest as err:
            assert err.extra.get("field") == "cursor"
        else:
            assert backend.fake is None, f"the fake refuses {token} as the service does"
            assert all(j.tenant == TENANT for j in page)


def test_a_continuation_with_a_partition_key_alone_goes_on(backend: Backend) -> None:
    # The service may send x-ms-continuation-NextPartitionKey without NextRowKey; the SDK's token then holds
    # RowKey None. The cursor built from it must be one the next request takes (it was a 400 "not a valid
    # continuation token": the client could never get past that page).
    ids = [submit(backend).job.id for _ in range(3)]
    _, cursor = backend.stores.jobs.list(TENANT, status=None, pipeline=None, limit=1, cursor=None)
    assert cursor is not None
    token = decode_cursor(cursor)
    alone = encode_cursor({"PartitionKey": token["PartitionKey"], "RowKey": None})
    assert alone is not None and decode_cursor(alone) == {"PartitionKey": token["PartitionKey"]}
    page, _ = backend.stores.jobs.list(TENANT, status=None, pipeline=None, limit=5, cursor=alone)
    assert {j.id for j in page} <= set(ids) and page  # from the start of the partition: a page, not a 400
    assert encode_cursor({"PartitionKey": None, "RowKey": None}) is None
