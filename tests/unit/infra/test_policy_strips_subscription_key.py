"""API Management's policy deletes the subscription key the client sent, header and query, as devhost's gateway does
(audit41): the gateway stripped ``Ocp-Apim-Subscription-Key`` and ``?subscription-key=`` before forwarding, but
policy.xml kept both, so in Azure the tenant's key reached the app (and its request logs), and a call authenticated
with ``?subscription-key=`` (apim.bicep's query name; a download link cannot set a header) was a 422 "unknown query
parameter 'subscription-key'" on GET /jobs, /responses and /result, which refuse what they do not know. Locally
every such call passed."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from devhost import gateway

POLICY = Path(__file__).resolve().parents[3] / "infra" / "apim" / "policy.xml"


def _deleted(tag: str) -> set[str]:
    inbound = ET.parse(POLICY).getroot().find("inbound")
    assert inbound is not None
    return {(e.get("name") or "").lower() for e in inbound.iter(tag) if e.get("exists-action") == "delete"}


def test_the_policy_deletes_the_subscription_key_query_parameter_and_code() -> None:
    assert {gateway.SUBSCRIPTION_QUERY, "code"} <= _deleted("set-query-parameter")


def test_the_policy_deletes_every_client_header_the_gateway_strips() -> None:
    hop_by_hop = {"host", "connection", "keep-alive", "transfer-encoding", "te", "upgrade", "proxy-connection",
                  "content-length"}
    assert gateway._STRIP - hop_by_hop <= _deleted("set-header")
