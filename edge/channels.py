"""How the edge reaches authsvc when several processes serve it: one gRPC channel over all their
addresses, round robin among those connected, and a failed call retried on another.

``--authsvc`` takes one gRPC target (``HOST:PORT``, or ``dns:///NAME:PORT`` for a name resolving to
several addresses) or several ``IP:PORT`` addresses (comma-separated or the flag repeated). gRPC's
``round_robin`` policy sends every call, the WatchKeyChanges stream included, only to a connected
address, so when one authsvc dies the next call and the watch's reconnection go to another; a unary call
caught on the dead connection is retried (UNAVAILABLE, up to three attempts). ConsumeSearch is not
retried: it counts a search, and a retry after a lost answer could count it twice.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable

# Calls that may safely run twice (they read, or write the same thing again).
RETRIED_METHODS = ("Authorize", "Authenticate", "ResolveTraveller", "DeleteTraveller", "GetUsage")
SERVICE = "travel.auth.v1.AuthService"


def authsvc_target(addresses: Iterable[str]) -> str:
    """The gRPC target for the authsvc addresses given (each may be comma-separated).

    One address is used as given. Several must be ``IPv4:PORT`` or ``[IPv6]:PORT`` of one family
    (gRPC's ``ipv4:``/``ipv6:`` targets take IP literals only); for names, give one ``dns:///NAME:PORT``
    that resolves to several. Anything else is a ValueError naming the entry.
    """
    entries = [e.strip() for a in addresses for e in a.split(",") if e.strip()]
    if not entries:
        raise ValueError("--authsvc: no address given")
    if len(entries) == 1:
        return entries[0]
    families: set[int] = set()
    for entry in entries:
        host, sep, port = entry.rpartition(":")
        try:
            if not sep or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError
            if host.startswith("[") and host.endswith("]"):
                addr: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.IPv6Address(host[1:-1])
            else:
                addr = ipaddress.IPv4Address(host)
        except ValueError:
            raise ValueError(
                f"--authsvc: {entry!r}: several addresses must each be IPv4:PORT or [IPv6]:PORT "
                "(for a name resolving to several, give one dns:///NAME:PORT)"
            ) from None
        families.add(addr.version)
    if len(families) > 1:
        raise ValueError("--authsvc: several addresses must all be IPv4 or all IPv6")
    return ("ipv4:" if families == {4} else "ipv6:") + ",".join(entries)


def authsvc_service_config() -> str:
    """gRPC service config: round robin over every resolved address, retries for RETRIED_METHODS."""
    return json.dumps(
        {
            "loadBalancingConfig": [{"round_robin": {}}],
            "methodConfig": [
                {
                    "name": [{"service": SERVICE, "method": m} for m in RETRIED_METHODS],
                    "retryPolicy": {
                        "maxAttempts": 3,
                        "initialBackoff": "0.01s",
                        "maxBackoff": "0.1s",
                        "backoffMultiplier": 2,
                        "retryableStatusCodes": ["UNAVAILABLE"],
                    },
                }
            ],
        }
    )
