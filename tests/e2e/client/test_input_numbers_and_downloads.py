"""Through the local host: numbers JSON cannot hold are refused, results download safely, retry's trace context."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from typing import Any

import pytest
from azure.data.tables import TableClient

from devhost.process import HostProcess
from thematiq_client import Client


def _http(host: HostProcess, method: str, path: str, body: bytes | None = None,
          headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(host.url + "/api/" + path, data=body, method=method, headers={
        "x-functions-key": host.env["DEVHOST_FUNCTION_KEY"], "content-type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, {k.lower(): v for k, v in err.headers.items()}, err.read()


@pytest.mark.parametrize("number", ["1e999", "-1e999", "1E400"])
def test_a_number_out_of_double_range_is_refused_at_input(client_host: HostProcess, number: str) -> None:
    body = ('{"pipeline": "echo", "input": {"x": ' + number + "}}").encode()
    status, headers, raw = _http(client_host, "POST", "jobs", body)
    assert status == 400 and headers["content-type"].startswith("application/problem+json"), raw
    problem: dict[str, Any] = json.loads(raw)
    assert problem["errors"][0]["field"] == "body" and "out of range" in problem["errors"][0]["message"]


def test_result_downloads_are_attachments_never_sniffed_or_run(client_host: HostProcess, client: Client) -> None:
    job = client.wait(client.submit("echo", {"html": "<script>alert(1)</script>"}), timeout=60)
    status, headers, _ = _http(client_host, "GET", f"jobs/{job.id}/result?format=json")
    assert status == 200
    assert headers["content-disposition"].startswith("attachment;")
    assert headers["x-content-type-options"] == "nosniff"
    assert "default-src 'none'" in headers["content-security-policy"] and "sandbox" in headers["content-security-policy"]


def test_retry_never_stores_the_callers_traceparent_verbatim(client_host: HostProcess, client: Client) -> None:
    failed = client.wait(client.submit("sleep", [{"id": "r1", "text": "x"}], {"seconds": 0.1, "fail": "permanent"}),
                         timeout=60)
    status, _, raw = _http(client_host, "POST", f"jobs/{failed.id}/retry", b"",
                           {"traceparent": "<not a trace context> " + "x" * 200})
    assert status == 202, raw
    new_id = json.loads(raw)["id"]
    table = TableClient.from_connection_string(client_host.env["AzureWebJobsStorage"], client_host.env["JOBS_TABLE"])
    stored = table.get_entity(client_host.env["DEFAULT_TENANT"], new_id).get("traceparent") or None
    assert stored is None or re.fullmatch(r"00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}", stored), stored
