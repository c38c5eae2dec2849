"""Queue trigger semantics (and queue output bindings) through real hosts on Azurite.

The basic app's host.json: batchSize 4, newBatchThreshold 2, maxDequeueCount 3,
visibilityTimeout 1 s, maxPollingInterval 0.5 s.
"""

from __future__ import annotations

import base64
import itertools
import time
import urllib.request

import pytest
from azure.core.exceptions import ResourceNotFoundError
from azure.storage.queue import QueueClient

from devhost.process import HostProcess
from tests.support.devhost_helpers import BASIC_APP, BasicHost, queue_env, read_records, wait_for


def count(q: QueueClient) -> int:
    """Approximate message count; 0 while the queue doesn't exist yet."""
    try:
        return int(q.get_queue_properties().approximate_message_count)
    except ResourceNotFoundError:
        return 0


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_success_deletes_and_passes_fields(basic: BasicHost) -> None:
    q = basic.queue("OK_QUEUE")
    q.send_message(b64("hello"))
    rec = wait_for(lambda: basic.records("queue_ok"))[0]
    assert rec["body"] == "hello" and rec["dequeue_count"] == 1
    assert rec["type"] == "azure.functions.queue.QueueMessage"
    assert all(rec[k] for k in ("pop_receipt", "insertion_time", "expiration_time", "time_next_visible"))
    wait_for(lambda: q.get_queue_properties().approximate_message_count == 0, timeout=30)
    assert not list(q.peek_messages(max_messages=5))


def test_failure_retries_then_poison(basic: BasicHost) -> None:
    q = basic.queue("FAIL_QUEUE")
    q.send_message(b64("bad"))
    poison = QueueClient.from_connection_string(basic.conn, basic.env["FAIL_QUEUE"] + "-poison")
    wait_for(lambda: count(poison) == 1, timeout=60)
    recs = basic.records("queue_fail")
    # maxDequeueCount 3: runs with dequeue counts 1, 2, 3, then the poison queue.
    assert [r["dequeue_count"] for r in recs] == [1, 2, 3]
    # visibilityTimeout 1 s between failed attempts.
    gaps = [b["t"] - a["t"] for a, b in itertools.pairwise(recs)]
    assert all(g >= 0.9 for g in gaps), gaps
    msg = next(iter(poison.receive_messages()))
    assert base64.b64decode(msg.content) == b"bad"  # copied unchanged
    # The host copies to the poison queue, then deletes the original (as the Functions host does):
    # under load the delete can land a moment after the copy is visible.
    wait_for(lambda: q.get_queue_properties().approximate_message_count == 0, timeout=30)


def test_not_base64_goes_to_poison_without_running(basic: BasicHost) -> None:
    q = basic.queue("OK_QUEUE")
    q.send_message("this is *not* base64!")
    poison = QueueClient.from_connection_string(basic.conn, basic.env["OK_QUEUE"] + "-poison")
    wait_for(lambda: count(poison) == 1, timeout=30)
    assert next(iter(poison.receive_messages())).content == "this is *not* base64!"
    assert all(r["body"] != "this is *not* base64!" for r in basic.records("queue_ok"))
    assert basic.host.running()


def test_queue_output_binding(basic: BasicHost) -> None:
    basic.queue("OUT_SRC_QUEUE").send_message(b64("MiXeD"))
    dst = basic.queue("OUT_DST_QUEUE")
    got: list[str] = []

    def collect() -> bool:
        got.extend(base64.b64decode(m.content).decode() for m in dst.receive_messages())
        return len(got) >= 2

    wait_for(collect)
    assert sorted(got) == ["MIXED", "mixed"]
    # From an HTTP function too.
    req = urllib.request.Request(basic.host.url + "/api/enqueue", data=b"via-http", method="POST")
    assert urllib.request.urlopen(req, timeout=30).read() == b"queued"
    msgs = wait_for(lambda: list(dst.receive_messages()))
    assert base64.b64decode(msgs[0].content) == b"via-http"


def test_renewal_and_competing_consumers(azurite: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Two hosts share a queue; each 6 s run outlives a 4 s visibility timeout that is renewed.

    If renewal or the pop receipt hand-over were wrong, the other host would
    receive the message again (a second 'start') or the delete would fail.
    """
    record = tmp_path_factory.mktemp("compete") / "records.jsonl"
    env = {
        "AzureWebJobsStorage": azurite, "RECORD_FILE": str(record),
        "DEVHOST_QUEUE_VISIBILITY_SECONDS": "4", "SLOW_SECONDS": "6", **queue_env(),
    }
    hosts = [HostProcess(BASIC_APP, env=env, args=["--no-http", "--no-timer"]) for _ in range(2)]
    try:
        for h in hosts:
            h.start()
        q = QueueClient.from_connection_string(azurite, env["SLOW_QUEUE"])
        for i in range(8):
            q.send_message(b64(f"m{i}"))
        wait_for(lambda: len([r for r in read_records(record) if r.get("phase") == "end"]) == 8, timeout=60)
        time.sleep(1.0)  # Give a wrongly redelivered message the chance to show up.
        recs = read_records(record)
        starts = [r for r in recs if r.get("phase") == "start"]
        assert sorted(r["body"] for r in starts) == [f"m{i}" for i in range(8)]  # each exactly once
        assert all(r["dequeue_count"] == 1 for r in starts)
        assert len({r["pid"] for r in starts}) == 2  # both hosts took work
        wait_for(lambda: q.get_queue_properties().approximate_message_count == 0, timeout=30)
        for h in hosts:
            assert "taken over" not in h.logs and "could not renew" not in h.logs
    finally:
        for h in hosts:
            h.stop()
