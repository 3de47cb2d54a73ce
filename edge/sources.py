"""The source address a key's allow list is checked against (decisions.md "Keys")."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence

from edge.exceptions import EdgeError

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def parse_networks(values: Iterable[str]) -> tuple[Network, ...]:
    out: list[Network] = []
    for value in values:
        for part in value.split(","):
            part = part.strip()
            if part:
                out.append(ipaddress.ip_network(part, strict=False))
    return tuple(out)


def parse_address(text: str) -> Address:
    text = text.strip()
    if text.startswith("[") and "]" in text:  # "[v6]" or "[v6]:port"
        text = text[1 : text.index("]")]
    elif text.count(":") == 1:  # "v4:port"
        text = text.split(":", 1)[0]
    addr = ipaddress.ip_address(text)
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    return addr


def _trusted(addr: Address, proxies: Sequence[Network]) -> bool:
    return any(addr.version == net.version and addr in net for net in proxies)


def list_entries(field_lines: Iterable[str]) -> list[str]:
    """The entries of a list-valued header sent on any number of field lines: RFC 9110 §5.3 makes the
    lines one value joined by commas in order, so a proxy appending its own line (HAProxy's
    ``forwardfor``) adds entries at the right instead of being ignored. Empty entries are dropped."""
    return [e.strip() for line in field_lines for e in line.split(",") if e.strip()]


def source_address(peer: str, forwarded_for: Iterable[str], proxies: Sequence[Network]) -> str:
    """The TCP peer, unless it is a trusted proxy: then the right-most X-Forwarded-For entry (over all
    its field lines, in order) that is not a trusted proxy (the left-most entry if all are). A malformed
    entry is invalid_request."""
    peer_addr = parse_address(peer)
    if not proxies or not _trusted(peer_addr, proxies):
        return str(peer_addr)
    entries = list_entries(forwarded_for)
    chosen = peer_addr
    for entry in reversed(entries):
        try:
            chosen = parse_address(entry)
        except ValueError:
            raise EdgeError(
                "X-Forwarded-For contains an entry that is not an IP address", type="invalid_request"
            ) from None
        if not _trusted(chosen, proxies):
            break
    return str(chosen)
