"""A JSON body labelled with another name of UTF-8, or with a charset whose bytes are UTF-8, is read (audit41).

RFC 8259 section 11 defines no charset parameter for application/json ("adding one really has no effect on compliant
recipients"); the 415 of review41 is for a body that is not UTF-8 (latin-1, UTF-16). ``charset=utf8`` (how MySQL and
many configuration files spell it) and ``charset=us-ascii`` (ASCII is UTF-8) were a 415 for a body the service reads.
"""

from __future__ import annotations

import json

import pytest

from shared.platform import Platform
from tests.support.direct import body_of, http

_BODY = json.dumps({"pipeline": "echo", "params": {}, "input": [1, 2]}).encode()


@pytest.mark.parametrize("content_type", ["application/json; charset=utf8", "application/json;charset=UTF8",
                                          "application/json; charset=us-ascii", "application/json; charset=ASCII"])
def test_a_charset_whose_bytes_are_utf8_is_read(platform: Platform, content_type: str) -> None:
    resp = http("submit_job", "POST", "jobs", raw=_BODY, headers={"Content-Type": content_type})
    assert resp.status_code == 202, resp.get_body()


@pytest.mark.parametrize("content_type", ["application/json; charset=utf-16", "application/json; charset=cp1252",
                                          "application/json; charset=no-such-charset",
                                          "application/json; charset=utf-8\x00", "application/json; charset="])
def test_a_charset_of_other_bytes_is_still_a_415(platform: Platform, content_type: str) -> None:
    resp = http("submit_job", "POST", "jobs", raw=_BODY, headers={"Content-Type": content_type})
    assert resp.status_code == 415, resp.get_body()
    assert [e["field"] for e in body_of(resp)["errors"]] == ["content-type"]
