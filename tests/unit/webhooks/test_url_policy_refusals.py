"""The webhook URL policy refuses ISATAP addresses (an IPv4 address in the interface identifier) and port 0."""

from __future__ import annotations

import pytest

from shared.core.webhooks import UnsafeUrl, check_url, normalise_url, refusal

PUBLIC = ["93.184.216.34"]


@pytest.mark.parametrize("address", [
    "fe80::5efe:10.0.0.1",          # link-local prefix (refused already by its prefix)
    "2001:db8:1::5efe:10.1.2.3",     # a global-looking prefix, private IPv4 in the identifier
    "2a00:1450::5efe:169.254.169.254",
    "2a00:1450::200:5efe:192.168.1.1",  # the universal/local bit set
    "2a00:1450::5efe:127.0.0.1",
    "2a00:1450::5efe:8.8.8.8",       # any IPv4: an ISATAP relay decides where it goes, not us
])
def test_isatap_addresses_are_refused(address: str) -> None:
    assert refusal(address) is not None
    with pytest.raises(UnsafeUrl, match="non-public"):
        check_url("https://h.example/x", allow_private=False, resolve=lambda h, p, a=address: [a])


def test_an_address_that_only_looks_like_isatap_elsewhere_is_allowed() -> None:
    # 5efe outside the identifier's upper half is an ordinary global address.
    assert refusal("2a00:1450:5efe::1") is None


@pytest.mark.parametrize("url", ["https://hooks.example.com:0/h", "https://hooks.example.com:00/h",
                                 "https://[2606:4700:4700::1111]:0/h"])
def test_port_zero_is_refused(url: str) -> None:
    with pytest.raises(UnsafeUrl, match="port"):
        normalise_url(url)


def test_an_explicit_ordinary_port_is_kept() -> None:
    url = normalise_url("https://hooks.example.com:8443/h")
    assert url == "https://hooks.example.com:8443/h"
    assert check_url(url, allow_private=False, resolve=lambda h, p: PUBLIC) == PUBLIC
