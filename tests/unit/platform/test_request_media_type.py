"""The routes that read a JSON body read it only as sent as JSON (review41): ``POST /api/jobs`` and ``PATCH
/api/jobs/{id}/themes`` parsed any body as JSON whatever its Content-Type (``text/plain``, a form, XML) and
ignored Content-Encoding, so a gzipped body was a 400 "not valid UTF-8". Now a 415 problem naming the header,
nothing stored; no Content-Type at all is still read as JSON."""

from __future__ import annotations

import gzip
import json
from typing import Any

import pytest

from shared.platform import Platform
from tests.support.direct import body_of, http

_BODY = json.dumps({"pipeline": "echo", "params": {}, "input": [1, 2]}).encode()

BAD_TYPES = ["text/plain", "text/plain; charset=utf-8", "application/x-www-form-urlencoded",
             "multipart/form-data; boundary=x", "application/xml", "application/jsonx", "application/json5",
             "application/json; charset=latin-1", "application/octet-stream"]
GOOD_TYPES = [None, "application/json", "application/json; charset=utf-8", 'Application/JSON; Charset="UTF-8"',
              " application/json "]


def _submit(headers: dict[str, str], raw: bytes = _BODY) -> Any:
    return http("submit_job", "POST", "jobs", raw=raw, headers=headers)


def _refused(resp: Any, field: str) -> None:
    assert resp.status_code == 415, resp.get_body()
    assert resp.mimetype == "application/problem+json"
    assert [e["field"] for e in body_of(resp)["errors"]] == [field]


@pytest.mark.parametrize("content_type", BAD_TYPES)
def test_a_body_of_another_media_type_is_a_415_naming_content_type(platform: Platform, content_type: str) -> None:
    _refused(_submit({"Content-Type": content_type}), "content-type")
    assert platform.service.list("local", {})[0] == []


@pytest.mark.parametrize("encoding", ["gzip", "br", "deflate"])
def test_a_compressed_body_is_a_415_naming_content_encoding(platform: Platform, encoding: str) -> None:
    _refused(_submit({"Content-Type": "application/json", "Content-Encoding": encoding}, gzip.compress(_BODY)),
             "content-encoding")
    assert platform.service.list("local", {})[0] == []


@pytest.mark.parametrize("content_type", GOOD_TYPES, ids=repr)
def test_json_or_no_content_type_is_read(platform: Platform, content_type: str | None) -> None:
    headers = {"Content-Encoding": "identity"} | ({"Content-Type": content_type} if content_type else {})
    assert _submit(headers).status_code == 202


def test_a_themes_edit_sent_as_a_form_is_a_415(platform: Platform) -> None:
    job = body_of(_submit({}))["id"]
    resp = http("edit_job_themes", "PATCH", f"jobs/{job}/themes", route_params={"id": job},
                headers={"If-Match": '"x"', "Content-Type": "application/x-www-form-urlencoded"},
                raw=b'{"edits": [{"op": "delete", "theme": "t1"}]}')
    _refused(resp, "content-type")
