"""One channel to a service however many processes serve it: every address in one target, round robin
among those connected, and a call that may safely run twice retried on another when its connection died.

An address is one gRPC target (``HOST:PORT``, or ``dns:///NAME:PORT`` for a name resolving to several)
or several ``IP:PORT`` addresses (comma-separated, or given as a list: a repeated flag). gRPC's
``round_robin`` policy sends every call, streams included, only to a connected address, so when one
process dies the next call and a stream's reconnection go to another; a unary call of the service's
retried list caught on the dead connection is retried (UNAVAILABLE, up to three attempts). A call that
counts or creates something is not retried: a retry after a lost answer could do it twice.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import grpc

from svckit.tls import Tls, channel


def target(addresses: str | Iterable[str], flag: str = "address") -> str:
    """The gRPC target for the addresses given (each may be comma-separated).

    One address is used as given. Several must be ``IPv4:PORT`` or ``[IPv6]:PORT`` of one family
    (gRPC's ``ipv4:``/``ipv6:`` targets take IP literals only); for names, give one ``dns:///NAME:PORT``
    that resolves to several. Anything else is a ValueError naming ``flag`` and the entry.
    """
    if isinstance(addresses, str):
        addresses = [addresses]
    entries = [e.strip() for a in addresses for e in a.split(",") if e.strip()]
    if not entries:
        raise ValueError(f"{flag}: no address given")
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
                f"{flag}: {entry!r}: several addresses must each be IPv4:PORT or [IPv6]:PORT "
                "(for a name resolving to several, give one dns:///NAME:PORT)"
            ) from None
        families.add(addr.version)
    if len(families) > 1:
        raise ValueError(f"{flag}: several addresses must all be IPv4 or all IPv6")
    return ("ipv4:" if families == {4} else "ipv6:") + ",".join(entries)


def service_config(retried: Mapping[str, Sequence[str]]) -> str:
    """gRPC service config: round robin over every resolved address, retries for the methods of
    ``retried`` ({full service name: [method, ...]})."""
    names = [{"service": service, "method": m} for service, methods in retried.items() for m in methods]
    config: dict[str, Any] = {"loadBalancingConfig": [{"round_robin": {}}]}
    if names:
        config["methodConfig"] = [
            {
                "name": names,
                "retryPolicy": {
                    "maxAttempts": 3,
                    "initialBackoff": "0.01s",
                    "maxBackoff": "0.1s",
                    "backoffMultiplier": 2,
                    "retryableStatusCodes": ["UNAVAILABLE"],
                },
            }
        ]
    return json.dumps(config)


def open_channel(
    addresses: str | Iterable[str],
    tls: Tls | None,
    server: str,
    *,
    retried: Mapping[str, Sequence[str]],
    options: Sequence[tuple[str, Any]] = (),
    interceptors: Sequence[grpc.aio.ClientInterceptor] = (),
) -> grpc.aio.Channel:
    """The channel to ``server`` ("authsvc", "webhookd") at ``addresses`` (``svckit.tls.channel``: mutual
    TLS verifying the server's name; plaintext only when ``tls`` is None), with the round robin and retry
    config and the ``interceptors``."""
    opts = [
        *options,
        ("grpc.service_config", service_config(retried)),
        ("grpc.enable_retries", 1),
    ]
    return channel(target(addresses, f"--{server}"), tls, server, opts, interceptors)
