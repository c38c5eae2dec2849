"""What only the fake can show quickly: a controlled clock and real thread races, in milliseconds.

The contract test proves the fake answers like Azurite; these pin the fake's
time and concurrency behaviour, which Azurite can only show with long sleeps.
"""

from __future__ import annotations

import base64
import threading
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from azure.core import MatchConditions
from azure.core.exceptions import ResourceExistsError, ResourceModifiedError

from shared.storage.fake import FakeClock, FakeStorage

START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def storage() -> FakeStorage:
    return FakeStorage(FakeClock(START))


def test_a_frozen_clock_stands_still_until_advanced() -> None:
    clock = FakeClock(START)
    assert clock.now() == START
    clock.advance(1.5)
    assert clock.now() == START + timedelta(seconds=1.5)
    live = FakeClock()
    live.advance(3600)
    assert live.now() - datetime.now(UTC) > timedelta(minutes=59)


def test_visibility_timeout_without_sleeping(storage: FakeStorage) -> None:
    q = storage.queue("jobs")
    q.send_message("job")
    got = q.receive_message(visibility_timeout=600)
    assert got.next_visible_on == START + timedelta(seconds=600)
    storage.clock.advance(599)
    assert q.receive_message() is None
    storage.clock.advance(2)
    again = q.receive_message(visibility_timeout=600)
    assert again.id == got.id and again.dequeue_count == 2
    q.delete_message(again)
    q.send_message("later", visibility_timeout=3600)
    assert [base64.b64decode(m.content) for m in q.peek_messages(32)] == []
    storage.clock.advance(3600)
    assert [base64.b64decode(m.content) for m in q.peek_messages(32)] == [b"later"]


def test_messages_expire_after_their_time_to_live(storage: FakeStorage) -> None:
    q = storage.queue("jobs")
    q.send_message("short", time_to_live=60)
    q.send_message("forever", time_to_live=-1)
    storage.clock.advance(61)
    assert q.get_queue_properties().approximate_message_count == 1
    storage.clock.advance(30 * 86400)
    assert base64.b64decode(q.receive_message().content) == b"forever"


def test_etags_change_even_on_a_frozen_clock(storage: FakeStorage) -> None:
    t = storage.table("jobs")
    etags = {t.upsert_entity({"PartitionKey": "p", "RowKey": "r", "n": i})["etag"] for i in range(50)}
    assert len(etags) == 50
    assert t.get_entity("p", "r").metadata["timestamp"] >= START


def test_datetime_filters_against_the_clock(storage: FakeStorage) -> None:
    t = storage.table("jobs")
    for i in range(5):
        t.create_entity({"PartitionKey": "p", "RowKey": f"r{i}", "heartbeat_at": START - timedelta(minutes=i)})
    stale = t.query_entities("heartbeat_at lt @cutoff", parameters={"cutoff": START - timedelta(minutes=2, seconds=30)})
    assert [e["RowKey"] for e in stale] == ["r3", "r4"]


def test_lease_expiry_and_takeover(storage: FakeStorage) -> None:
    blob = storage.container("azure-webjobs-hosts").get_blob_client("locks/h/T.Listener")
    blob.upload_blob(b"")
    mine = blob.acquire_lease(lease_duration=15, lease_id="a" * 8)
    storage.clock.advance(16)
    mine.renew()  # expired, but nobody took it: renewable
    storage.clock.advance(14)
    with pytest.raises(ResourceExistsError):
        blob.acquire_lease(lease_duration=15, lease_id="b" * 8)
    storage.clock.advance(2)
    theirs = blob.acquire_lease(lease_duration=15, lease_id="b" * 8)
    with pytest.raises(ResourceExistsError) as exc:
        mine.renew()
    assert exc.value.status_code == 409
    theirs.release()
    blob.upload_blob(b"free", overwrite=True)


def test_racing_conditional_updates_have_one_winner(storage: FakeStorage) -> None:
    t = storage.table("jobs")
    etag = t.create_entity({"PartitionKey": "p", "RowKey": "job", "owner": ""})["etag"]
    outcomes: Counter[str] = Counter()
    barrier = threading.Barrier(8)

    def claim(worker: int) -> None:
        barrier.wait()
        try:
            t.update_entity(
                {"PartitionKey": "p", "RowKey": "job", "owner": f"w{worker}"},
                etag=etag,
                match_condition=MatchConditions.IfNotModified,
            )
            outcomes["won"] += 1
        except ResourceModifiedError:
            outcomes["412"] += 1

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert outcomes == Counter({"won": 1, "412": 7})


def test_competing_consumers_get_each_message_once(storage: FakeStorage) -> None:
    q = storage.queue("jobs")
    for i in range(200):
        q.send_message(str(i))
    seen: list[str] = []
    lock = threading.Lock()

    def consume() -> None:
        while True:
            batch = list(q.receive_messages(messages_per_page=16, max_messages=16, visibility_timeout=600))
            if not batch:
                return
            for m in batch:
                q.delete_message(m)
                with lock:
                    seen.append(m.id)

    threads = [threading.Thread(target=consume) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(seen) == len(set(seen)) == 200
    assert storage.ops()["queue:delete"] == 200


def test_bundle_returns_one_client_per_name(storage: FakeStorage) -> None:
    assert storage.table("a") is storage.table("a")
    assert storage.queue("a") is storage.queue("a")
    assert storage.container("a") is storage.container("a")
    missing = storage.table("nope", create=False)
    with pytest.raises(Exception) as exc:
        missing.get_entity("p", "r")
    assert getattr(exc.value, "status_code", None) == 404
