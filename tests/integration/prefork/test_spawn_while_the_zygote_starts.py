"""An attempt that arrives while the host's first zygote is still importing runs in a fresh interpreter instead of
waiting for it (``shared.runtime.prefork.SPAWN_WHILE_WARMING``), and later attempts fork from the zygote.

The host starts its zygote at its first queue invocation since review44p's follow-up (not at import), so that
first job would otherwise wait for numpy and every pipeline to import (bench/platform.py --sections first)."""

from __future__ import annotations

import threading

import pytest

from shared.config.settings import get_settings
from shared.runtime import prefork
from shared.runtime.runner import AttemptResult
from tests.integration.prefork.test_prefork import Lease, children_of, spec
from tests.support.waiting import wait_until

pytestmark = pytest.mark.skipif(not prefork.fork_supported(), reason="fork attempts need Linux")


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> prefork.Zygote:
    z = prefork.Zygote()
    monkeypatch.setattr(prefork, "_ZYGOTE", z)
    monkeypatch.setattr(prefork, "_SPAWN_MEANWHILE", threading.Event())
    yield z
    z.close()


def _run(pipeline: str = "echo") -> AttemptResult:
    return prefork.ForkRunner(Lease(), spec(pipeline, {}), 60, get_settings()).run({"x": 1})


def test_an_attempt_while_the_first_zygote_starts_is_spawned(fresh: prefork.Zygote) -> None:
    prefork._SPAWN_MEANWHILE.set()
    fresh.warming = True  # a background start under way (prewarm), not ready yet
    out = _run()
    assert out.kind == "succeeded" and out.result == b'{"echo":{"x":1}}'
    assert fresh.started == 0 and not fresh.alive(), "it did not wait for (or start) the zygote"


def test_once_it_is_ready_attempts_fork_from_it(fresh: prefork.Zygote) -> None:
    prefork.prewarm(spawn_meanwhile=True)
    fresh.ensure()  # waits for the background start
    seen: list[str] = []
    runner = prefork.ForkRunner(Lease(), spec("sleep", {"seconds": 1.0, "steps": 2}), 60, get_settings())
    t = threading.Thread(target=lambda: seen.append(runner.run({"x": 1}).kind))
    t.start()
    wait_until(lambda: children_of(fresh.pid or 0), timeout=30, what="the attempt forked from the zygote")
    t.join()
    assert seen == ["succeeded"] and fresh.started == 1


def test_without_the_switch_an_attempt_waits_for_the_zygote(fresh: prefork.Zygote) -> None:
    fresh.warming = True
    assert _run().kind == "succeeded"
    assert fresh.started == 1 and fresh.alive()
