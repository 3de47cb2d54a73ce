"""The buckets a client address is counted in by per-source limits: its source (an IPv4 address, an IPv6
address's /64, the block one subscriber usually holds) and its block (the IPv4 /24 or IPv6 /48 around it,
where one party may hold many addresses). An IPv4-mapped IPv6 address counts as its IPv4 address.

The edge's unknown-key budgets, the portal's sign-in limits and refusal pacing (svckit.pacing) all count
by these."""

from __future__ import annotations

import functools
import ipaddress


@functools.lru_cache(maxsize=4096)
def buckets(address: str) -> tuple[str, str]:
    """The source and block of an address, from one parse, and cached (asked on every refusal and miss;
    a flood's addresses repeat). Anything unparsable is its own source and block."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address, address
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if isinstance(ip, ipaddress.IPv4Address):
        text = str(ip)
        return text, text[: text.rindex(".")] + ".0/24"
    # Masked as integers: ip_network() costs several times more.
    n = int(ip)
    return f"{ipaddress.IPv6Address(n >> 64 << 64)}/64", f"{ipaddress.IPv6Address(n >> 80 << 80)}/48"


def source_key(address: str) -> str:
    """The source bucket of an address: itself, or its /64 for IPv6; anything unparsable as given."""
    return buckets(address)[0]


def block_key(address: str) -> str:
    """The block of an address: its IPv4 /24 or IPv6 /48; anything unparsable as given."""
    return buckets(address)[1]
