"""The source address behind trusted proxies and X-Forwarded-For (edge.sources), by table."""

from __future__ import annotations

import ipaddress

import pytest

from edge.sources import list_entries, parse_networks, source_address
from tests.unit.edge_keys import error_type

# -- source address ----------------------------------------------------------------------------------
PROXIES = parse_networks(["10.0.0.0/8", "fd00::/8,192.0.2.1"])


@pytest.mark.parametrize(
    ("peer", "xff", "expected"),
    [
        ("203.0.113.5", [], "203.0.113.5"),
        ("203.0.113.5", ["1.2.3.4"], "203.0.113.5"),  # untrusted peer: header ignored
        ("10.1.1.1", [], "10.1.1.1"),
        ("10.1.1.1", ["198.51.100.7"], "198.51.100.7"),
        ("10.1.1.1", ["6.6.6.6, 198.51.100.7"], "198.51.100.7"),  # right-most untrusted entry
        ("10.1.1.1", ["6.6.6.6, 198.51.100.7, 10.2.2.2, 192.0.2.1"], "198.51.100.7"),
        ("10.1.1.1", ["10.9.9.9, 10.2.2.2"], "10.9.9.9"),  # all trusted: left-most
        ("fd00::1", ["2001:db8::5"], "2001:db8::5"),
        ("::ffff:10.0.0.2", ["198.51.100.8"], "198.51.100.8"),
        ("10.1.1.1", ["[2001:db8::9]:443"], "2001:db8::9"),
        ("10.1.1.1", ["198.51.100.7:5555"], "198.51.100.7"),
        # Several field lines are one list, in order (RFC 9110 §5.3): a proxy's own line comes last.
        ("10.1.1.1", ["10.1.2.3", "8.8.8.8"], "8.8.8.8"),
        ("10.1.1.1", ["6.6.6.6, 10.1.2.3", "8.8.8.8, 10.2.2.2"], "8.8.8.8"),
        ("10.1.1.1", ["198.51.100.7", "10.2.2.2"], "198.51.100.7"),
        ("10.1.1.1", ["198.51.100.7", ""], "198.51.100.7"),  # an empty line adds nothing
        ("10.1.1.1", ["", " , "], "10.1.1.1"),
    ],
)
def test_source_address(peer: str, xff: list[str], expected: str) -> None:
    assert source_address(peer, xff, PROXIES) == expected


@pytest.mark.parametrize(
    ("lines", "entries"),
    [
        ([], []),
        (["a"], ["a"]),
        (["a, b", "c"], ["a", "b", "c"]),
        ([" a ,,b ", "", "c,"], ["a", "b", "c"]),
    ],
)
def test_list_entries_joins_field_lines_in_order(lines: list[str], entries: list[str]) -> None:
    assert list_entries(lines) == entries


def test_source_address_without_proxies_is_the_peer() -> None:
    assert source_address("10.1.1.1", ["1.2.3.4"], ()) == "10.1.1.1"


@pytest.mark.parametrize(
    "xff", [["not-an-ip"], ["1.2.3.4, junk"], ["1.2.3.4, 10.0.0.1, ???"], ["1.2.3.4", "junk"]]
)
def test_malformed_forwarded_for_is_invalid_request(xff: list[str]) -> None:
    assert error_type(source_address, "10.1.1.1", xff, PROXIES) == "invalid_request"


def test_parse_networks() -> None:
    assert parse_networks(["10.0.0.0/8, 192.0.2.1"]) == (
        ipaddress.ip_network("10.0.0.0/8"),
        ipaddress.ip_network("192.0.2.1/32"),
    )
