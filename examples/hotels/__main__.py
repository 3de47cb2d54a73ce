"""python -m examples.hotels serve: the reference hotels service (HTTPS, mutual TLS) behind the edge.

Every flag falls back to ``HOTELS_<FLAG>`` in the environment: ``HOTELS_TLS_CA``, ``HOTELS_TLS_CERT`` and
``HOTELS_TLS_KEY`` are the service's certificate (``svcctl certs init --identity product:hotels``), the
same variables ``Tls.from_env("HOTELS")`` reads.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from examples.hotels.app import Hotels, create_app
from svckit import addresses, tracing
from svckit.clients import AuthClient, HooksClient
from svckit.flags import FlagParser, add_flag, csv_list, env_name
from svckit.logs import setup_logging
from svckit.runner import print_ready, run_until_signal
from svckit.tlsflags import add_tls_args, tls_from_args
from svckit.webserver import ServerProtocol, bind

SERVICE = "hotels"
LISTEN = "127.0.0.1:9201"  # the live hotels upstream of the edge's default route table
AUTHSVC_TIMEOUT = 2.0  # seconds per authsvc call
log = logging.getLogger(SERVICE)


def build_parser() -> argparse.ArgumentParser:
    parser = FlagParser(prog="python -m examples.hotels", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="serve the hotels routes over HTTPS")

    def flag(name: str, **kwargs: Any) -> None:
        add_flag(s, f"--{name}", env=env_name(SERVICE, name), **kwargs)

    flag("listen", default=LISTEN, help="HTTPS listen address HOST:PORT (port 0 picks one)")
    flag("authsvc", default=addresses.AUTHSVC, help="authsvc gRPC target")
    flag("webhookd", default=addresses.WEBHOOKD, help="webhookd gRPC target")
    flag(
        "authsvc-timeout",
        type=float,
        default=AUTHSVC_TIMEOUT,
        help=f"deadline of each authsvc call in seconds (default {AUTHSVC_TIMEOUT}); past it the booking "
        "answers 503 service_unavailable",
    )
    flag(
        "edge-identity",
        default="edge",
        help="certificate names whose identity headers are believed (comma-separated)",
    )
    flag(
        "edge-public-key",
        default="",
        help="the edge's Ed25519 public key (PEM): take the identity from its signed X-Edge-Assertion "
        "(behind a proxy that ends TLS) instead of the peer's certificate",
    )
    flag("log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR")
    tracing.add_tracing_args(s, SERVICE)
    add_tls_args(s, SERVICE)
    return parser


async def serve(args: argparse.Namespace) -> None:
    tls = tls_from_args(args)
    tracing.setup(SERVICE, args.otlp_endpoint)
    auth = AuthClient(args.authsvc, tls, timeout=args.authsvc_timeout)
    hooks = HooksClient(args.webhookd, tls, timeout=5.0)
    trusted = frozenset(csv_list(args.edge_identity))
    app = create_app(Hotels(auth, hooks, tls is not None, trusted, edge_key=public_key(args.edge_public_key)))
    sock = bind(args.listen)
    context = tls.ssl_context(server=True) if tls is not None else None
    server = await app.create_server(sock=sock, ssl=context, protocol=ServerProtocol, access_log=False)
    assert server is not None
    # (Sanic leaves AsyncioServer's lifecycle methods unannotated.)
    await server.startup()  # type: ignore[no-untyped-call]
    await server.before_start()  # type: ignore[no-untyped-call]
    await server.start_serving()  # type: ignore[no-untyped-call]
    await server.after_start()  # type: ignore[no-untyped-call]
    port = sock.getsockname()[1]
    log.info("hotels serving", extra={"port": port, "tls": tls is not None})
    print_ready(SERVICE, port=port)

    async def stop() -> None:
        server.close()  # type: ignore[no-untyped-call]
        await server.wait_closed()  # type: ignore[no-untyped-call]
        await auth.close()
        await hooks.close()
        tracing.shutdown()

    await run_until_signal(stop)


def public_key(path: str) -> Ed25519PublicKey | None:
    if not path:
        return None
    with open(path, "rb") as f:
        key = serialization.load_pem_public_key(f.read())
    if not isinstance(key, Ed25519PublicKey):
        raise ValueError(f"--edge-public-key: {path} is not an Ed25519 public key")
    return key


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(SERVICE, args.log_level)
    try:
        asyncio.run(serve(args))
    except (OSError, ValueError) as exc:
        print(f"hotels: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
