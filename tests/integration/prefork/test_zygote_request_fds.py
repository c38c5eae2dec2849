"""A fork request that fails after its descriptors arrived leaves none of them open in the zygote."""

from __future__ import annotations

import json
import os
import socket

import pytest

from shared.runtime import zygote


def _open_fds() -> set[int]:
    return {int(n) for n in os.listdir("/proc/self/fd")}


@pytest.mark.parametrize("how", ["hung-up-mid-body", "body-not-json"])
def test_a_request_that_fails_after_its_descriptors_closes_them(how: str) -> None:
    host, zyg = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pipes = [os.pipe(), os.pipe(), os.pipe()]
    passed = [w for _r, w in pipes]
    try:
        before = _open_fds()
        body = b"{not json" if how == "body-not-json" else json.dumps({"spec": "x"}).encode()
        length = len(body) if how == "body-not-json" else len(body) + 100  # hung-up: promises more than it sends
        socket.send_fds(host, [zygote._HEADER.pack(length)], passed)
        host.sendall(body)
        host.close()
        killed: list[int] = []
        assert zygote._answer(zyg, os.getpid(), killed.append) is None  # this request fails, nothing forked
        assert not killed
        # Everything the request brought in (the three descriptors) is closed again; only ours remain.
        assert _open_fds() - before == set(), "descriptors of a failed request left open in the zygote"
    finally:
        for r, w in pipes:
            os.close(r)
            os.close(w)
        zyg.close()
