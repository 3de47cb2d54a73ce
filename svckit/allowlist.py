"""IP allow lists: IPv4/IPv6 addresses and CIDR ranges (spec §5 "IP allow lists").

Entries are validated strictly: a CIDR with host bits set (``10.0.0.1/24``) is refused rather than
silently widened, so the stored list is exactly what the partner meant. A bare address is stored as
itself (a /32 or /128 range). IPv4-mapped IPv6 sources (``::ffff:10.0.0.1``) match IPv4 entries.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterable, Sequence

from svckit.errors import InvalidInput
from svckit.logs import redact

MAX_ENTRIES = 50
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def normalise_entry(entry: str, field: str = "allowed_sources") -> str:
    text = entry.strip()
    if not text or len(text) > 64:
        raise InvalidInput(f"{field}: {redact(entry[:64])!r} is not an IP address or CIDR range")
    try:
        if "/" in text:
            return str(ipaddress.ip_network(text, strict=True))
        return str(ipaddress.ip_address(text))
    except ValueError as exc:
        if "host bits set" in str(exc):
            raise InvalidInput(
                f"{field}: {text!r} has host bits set; use the network address, e.g. "
                f"{ipaddress.ip_network(text, strict=False)}"
            ) from None
        raise InvalidInput(f"{field}: {redact(text)!r} is not an IP address or CIDR range") from None


def validate_allowlist(entries: Iterable[str], field: str = "allowed_sources") -> tuple[str, ...]:
    out: list[str] = []
    for entry in entries:
        norm = normalise_entry(entry, field)
        if norm not in out:
            out.append(norm)
        if len(out) > MAX_ENTRIES:
            raise InvalidInput(f"{field}: at most {MAX_ENTRIES} entries are allowed")
    return tuple(out)


def compile_allowlist(entries: Sequence[str]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(e, strict=False) for e in entries)


@functools.lru_cache(maxsize=4096)
def parse_source(source: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        addr = ipaddress.ip_address(source.strip())
    except ValueError:
        return None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    return addr


def source_allowed(source: str, networks: Sequence[Network]) -> bool:
    """Empty list: any source. Otherwise the source must parse and fall in one of the ranges."""
    if not networks:
        return True
    addr = parse_source(source)
    if addr is None:
        return False
    return any(addr.version == net.version and addr in net for net in networks)
