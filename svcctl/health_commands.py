"""``svcctl health``: the gRPC health of every authsvc and webhookd process, one line each.

``--authsvc`` and ``--webhookd`` may list several processes (``A,B``, as every peer flag,
docs/operations.md); each address is asked on its own (``grpc.health.v1.Health/Check``, service ""), so
an operator sees which process is down or ``NOT_SERVING`` (its database unreachable), not only whether a
round robin found one that answers. Exit 0 when every one is ``SERVING``, else 1.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from svckit.readiness import CHECK_TIMEOUT, peer_check, readiness
from svckit.tls import channel
from svckit.tlsflags import tls_from_args


def addresses_of(flag: str) -> list[str]:
    return [a.strip() for a in flag.split(",") if a.strip()]


async def _health(args: argparse.Namespace) -> int:
    tls = tls_from_args(args)
    peers = [("authsvc", a) for a in addresses_of(args.authsvc)]
    peers += [("webhookd", a) for a in addresses_of(args.webhookd)]
    channels = [channel(address, tls, server) for server, address in peers]
    try:
        results = await readiness(
            {
                f"{server} {address}": peer_check(ch, args.timeout)
                for (server, address), ch in zip(peers, channels, strict=True)
            },
            args.timeout + 1,
        )
    finally:
        await asyncio.gather(*(ch.close() for ch in channels))
    for name, result in results.items():
        print(f"{name}  {'SERVING' if result == 'ok' else result}")
    return 0 if all(r == "ok" for r in results.values()) else 1


def register(groups: Any) -> None:
    help = "the gRPC health of every process --authsvc and --webhookd list (exit 1 unless all SERVING)"
    p = groups.add_parser("health", help=help, description=help)
    p.add_argument(
        "--timeout", type=float, default=CHECK_TIMEOUT, help=f"seconds each has to answer ({CHECK_TIMEOUT:g})"
    )
    p.set_defaults(handler=_health)
