"""SSRF guard: which webhook targets are allowed, checked at registration and again at connect time.

At delivery the transport (``_http.FastTransport``) resolves the host through ``resolve_checked``, checks
every resolved address and connects to a checked address; TLS SNI, certificate verification and the Host
header still use the URL's name, so there is no window between the check and the connection (DNS
rebinding).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from webhookd._errors import InvalidRequest, UnsafeTarget

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Awaitable[list[str]]]

MAX_URL_LENGTH = 2048
METADATA_ADDRESSES = frozenset(
    {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}
)
_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


@dataclass(frozen=True, slots=True)
class Policy:
    allow_http: bool = False
    allow_private: bool = False


def forbidden_reason(ip: IPAddress) -> str | None:
    """Why a target address is refused, or None if it is a public unicast address."""
    if ip in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if isinstance(ip, ipaddress.IPv6Address):
        embedded: ipaddress.IPv4Address | None = ip.ipv4_mapped or ip.sixtofour
        if embedded is None and ip in _NAT64:
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is not None:
            inner = forbidden_reason(embedded)
            return f"an IPv6 address embedding {inner}" if inner else None
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
    if literal is not None and not policy.allow_private:
        reason = forbidden_reason(literal)
        if reason:
            raise UnsafeTarget(f"{field}: target {host} is {reason}")
    return Target(scheme, host, port or (443 if scheme == "https" else 80), literal)


async def system_resolver(host: str, port: int) -> list[str]:
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    out: list[str] = []
    for _family, _type, _proto, _canon, sockaddr in infos:
        addr = str(sockaddr[0]).split("%", 1)[0]
        if addr not in out:
            out.append(addr)
    return out


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
    if not policy.allow_private:
        for addr in addresses:
            reason = forbidden_reason(ipaddress.ip_address(addr))
            if reason:
                raise UnsafeTarget(f"url: host {host} resolves to {addr}, {reason}")
    return addresses


async def check_target(url: str, policy: Policy, resolver: Resolver = system_resolver) -> Target:
    """Everything registration checks: the URL and every address its host resolves to now."""
    target = check_url(url, policy)
    await resolve_checked(target.host, target.port, policy, resolver)
    return target
