"""GET /api/jobs's storage side (JobStore.list): a filtered listing fills its page across the short or empty
service pages a filtered Table query can return, within a fixed number of service requests per call. On the
fake with a scan budget (the real service's 1,000 rows per request), and on Azurite, whose pages are full."""

from __future__ import annotations

import pytest

from shared.config.constants import LIST_MAX_SERVICE_PAGES
from shared.core.lifecycle import Lifecycle
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
