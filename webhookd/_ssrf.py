"""SSRF guard: which webhook targets are allowed, checked at registration and again at connect time.

At delivery the transport (``_http.FastTransport``) resolves the host through ``resolve_checked``, checks
every resolved address and connects to a checked address; TLS SNI, certificate verification and the Host
header still use the URL's name, so there is no window between the check and the connection (DNS
rebinding).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from svckit.http import system_addresses
from webhookd._errors import InvalidRequest, UnsafeTarget

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Awaitable[list[str]]]
# The default resolver (the system's), under the name the rest of webhookd imports it by.
system_resolver: Resolver = system_addresses

MAX_URL_LENGTH = 2048

# Cloud metadata and instance-credential services: refused whatever the flags (``--allow-private-targets``
# opens private and loopback ranges for development, never these). AWS IMDS (IPv4 and IPv6), ECS task
# metadata, EKS Pod Identity (IPv4 and IPv6), GCP/Azure/OpenStack/DigitalOcean (169.254.169.254 too),
# Azure WireServer, Oracle Cloud's legacy address, Alibaba Cloud, Tencent Cloud, Scaleway.
METADATA_ADDRESSES: frozenset[IPAddress] = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",
        "169.254.170.2",
        "169.254.170.23",
        "168.63.129.16",
        "192.0.0.192",
        "100.100.100.200",
        "169.254.0.23",
        "169.254.42.42",
        "fd00:ec2::254",
        "fd00:ec2::23",
    )
)
_CGNAT = ipaddress.ip_network("100.64.0.0/10")
# IPv6 forms whose last 32 bits are an IPv4 address a host or a translator may reach:
# IPv4-compatible (::/96, deprecated), IPv4-translated (::ffff:0:0:0/96, SIIT), well-known NAT64.
_EMBEDS_LOW_32 = (
    ipaddress.ip_network("::/96"),
    ipaddress.ip_network("::ffff:0:0:0/96"),
    ipaddress.ip_network("64:ff9b::/96"),
)
_LOCAL_NAT64 = ipaddress.ip_network("64:ff9b:1::/48")  # RFC 8215, into the operator's own networks


@dataclass(frozen=True, slots=True)
class Policy:
    allow_http: bool = False
    allow_private: bool = False


def embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 form carries (mapped, translated, compatible, NAT64, 6to4, Teredo client)."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    # :: and ::1 are the IPv6 unspecified and loopback addresses, not IPv4-compatible ones.
    if int(ip) > 1 and any(ip in net for net in _EMBEDS_LOW_32):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def forbidden_reason(ip: IPAddress, *, allow_private: bool = False) -> str | None:
    """Why a target address is refused, or None if it may be a webhook target.

    A public unicast address is allowed; ``allow_private`` (development) also allows private, loopback
    and other non-global ones, but never a cloud metadata address (nor local-use NAT64). An IPv6 address
    that carries an IPv4 address is judged by that IPv4 address too, so no IPv6 spelling reaches what the
    IPv4 address may not.
    """
    if ip in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = embedded_ipv4(ip)
        if embedded is not None:
            inner = forbidden_reason(embedded, allow_private=allow_private)
            if inner:
                return f"an IPv6 address embedding {embedded}, {inner}"
            if ip.teredo is None:
                return None  # only another spelling of an allowed IPv4 address
        if ip in _LOCAL_NAT64:
            # Where the IPv4 address sits depends on the operator's prefix length: it cannot be checked.
            return "a local-use NAT64 address"
    if allow_private:
        return None
    if ip.is_unspecified:
        return "the unspecified address"
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_link_local:
        return "a link-local address"
    if ip.is_multicast:
        return "a multicast address"
    if isinstance(ip, ipaddress.IPv4Address) and ip in _CGNAT:
        return "a carrier-grade NAT address"
    if ip.is_private:
        return "a private address"
    if isinstance(ip, ipaddress.IPv6Address) and ip.is_site_local:
        return "a site-local address"
    if not ip.is_global:
        return "a reserved, non-global address"
    return None


@dataclass(frozen=True, slots=True)
class Target:
    scheme: str
    host: str
    port: int
    literal_ip: IPAddress | None


def check_url(url: str, policy: Policy, field: str = "url") -> Target:
    """Syntax, scheme and (for literal IPs) address checks that need no DNS."""
    if not url:
        raise InvalidRequest(f"{field}: is required")
    if len(url) > MAX_URL_LENGTH:
        raise InvalidRequest(f"{field}: longer than {MAX_URL_LENGTH} characters")
    if any(c.isspace() for c in url):
        raise InvalidRequest(f"{field}: must not contain whitespace")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise InvalidRequest(f"{field}: not a valid URL ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme != "https" and not (scheme == "http" and policy.allow_http):
        raise UnsafeTarget(f"{field}: must be an https:// URL")
    if parts.username is not None or parts.password is not None:
        raise InvalidRequest(f"{field}: must not contain credentials")
    if parts.fragment:
        raise InvalidRequest(f"{field}: must not contain a fragment")
    host = parts.hostname
    if not host:
        raise InvalidRequest(f"{field}: has no host")
    literal: IPAddress | None
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is not None:
        reason = forbidden_reason(literal, allow_private=policy.allow_private)
        if reason:
            raise UnsafeTarget(f"{field}: target {host} is {reason}")
    return Target(scheme, host, port or (443 if scheme == "https" else 80), literal)


async def resolve_checked(
    host: str, port: int, policy: Policy, resolver: Resolver = system_resolver
) -> list[str]:
    """Resolved addresses of ``host``, every one checked; UnsafeTarget if any is refused."""
    try:
        ip = ipaddress.ip_address(host.strip("[]"))
        addresses = [str(ip)]
    except ValueError:
        try:
            addresses = await resolver(host, port)
        except OSError as exc:
            raise UnsafeTarget(f"url: host {host} does not resolve ({exc.strerror or exc})") from None
    if not addresses:
        raise UnsafeTarget(f"url: host {host} does not resolve")
    for addr in addresses:
        reason = forbidden_reason(ipaddress.ip_address(addr), allow_private=policy.allow_private)
        if reason:
            raise UnsafeTarget(f"url: host {host} resolves to {addr}, {reason}")
    return addresses


async def check_target(url: str, policy: Policy, resolver: Resolver = system_resolver) -> Target:
    """Everything registration checks: the URL and every address its host resolves to now."""
    target = check_url(url, policy)
    await resolve_checked(target.host, target.port, policy, resolver)
    return target
