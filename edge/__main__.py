"""python -m edge serve: the live and sandbox listeners of the partner gateway in one process."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

import uvloop

from edge.app import create_app
from edge.authcache import DENIAL_CACHE_SIZE
from edge.config import DEFAULT_LIVE_LISTEN, DEFAULT_SANDBOX_LISTEN, MAX_BODY_BYTES, EdgeConfig
from edge.environments import listen_hosts
from edge.routetable import RouteTable, RouteTableError
from edge.server import EdgeProtocol
from edge.sources import parse_networks
from svckit.clients.auth import auth_target
from svckit.db import normalize_url
from svckit.logs import setup_logging
from svckit.metrics import serve_metrics
from svckit.runner import env_name, print_ready, run_until_signal
from svckit.secretbox import SealingKeyError, key_from, new_key
from svckit.tls import add_tls_args, tls_from_args
from svckit.webserver import bind, start

log = logging.getLogger("edge")


def _env(flag: str, default: str) -> str:
    return os.environ.get(env_name("edge", flag), default)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m edge", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("new-idempotency-key", help="print a new key for --idempotency-key-file")
    s = sub.add_parser("serve", help="serve the live and sandbox listeners")

    def add(flag: str, default: str, help: str) -> None:
        s.add_argument(
            f"--{flag}", default=_env(flag, default), help=f"{help} (env {env_name('edge', flag)})"
        )

    add("live-listen", DEFAULT_LIVE_LISTEN, "live listener HOST:PORT (port 0 picks one)")
    add("sandbox-listen", DEFAULT_SANDBOX_LISTEN, "sandbox listener HOST:PORT (port 0 picks one)")
    follow = "default: localhost and the loopback address (or the listen address) at the {} listener's port"
    add("live-hosts", "", f"comma-separated Host values that mean live ({follow.format('live')})")
    add("sandbox-hosts", "", f"comma-separated Host values that mean sandbox ({follow.format('sandbox')})")
    s.add_argument(
        "--authsvc",
        action="append",
        help="authsvc gRPC address HOST:PORT (default 127.0.0.1:50051); several authsvc processes: IP:PORT "
        "addresses comma-separated or the flag repeated, or one dns:///NAME:PORT resolving to several "
        "(round robin, failover of calls and of the key-change watch; env EDGE_AUTHSVC, comma-separated)",
    )
    add("webhookd", "127.0.0.1:50052", "webhookd gRPC target")
    s.add_argument(
        "--database",
        default=os.environ.get("EDGE_DATABASE")
        or os.environ.get("DATABASE_URL")
        or "sqlite+aiosqlite:///var/edge.db",
        help="idempotency store URL: sqlite+aiosqlite:///path or postgresql+asyncpg://... "
        "(env EDGE_DATABASE, then DATABASE_URL); default sqlite+aiosqlite:///var/edge.db",
    )
    add("metrics-listen", "127.0.0.1:9103", "Prometheus /metrics HOST:PORT, empty to disable")
    add(
        "idempotency-key-file",
        "",
        "file with the key sealing stored idempotent responses (AES-256, base64url; or the key itself in "
        "EDGE_IDEMPOTENCY_KEY; `python -m edge new-idempotency-key` makes one)",
    )
    s.add_argument(
        "--trusted-proxy",
        action="append",
        default=[p for p in _env("trusted-proxy", "").split(",") if p.strip()],
        help="CIDR or address of a trusted reverse proxy "
        "(repeatable; env EDGE_TRUSTED_PROXY, comma-separated)",
    )
    add("routes", "", "product route table JSON file (default: the built-in example table)")
    add("docs-base", EdgeConfig.docs_base, "base URL of the partner docs (docUrl: <base>/errors#<type>)")
    add("max-body-bytes", str(MAX_BODY_BYTES), "largest request body accepted (413 above)")
    per = (
        "a key without its own limit (bursts of 2 s; per edge process, or across edges with --redis), 0: none"
    )
    add("rate-limit-live", f"{EdgeConfig.rate_limit_live:g}", f"requests/s per live key: {per}")
    add("rate-limit-sandbox", f"{EdgeConfig.rate_limit_sandbox:g}", f"requests/s per test key: {per}")
    add(
        "redis", "", "Redis URL sharing per-key rate limits between edges (redis://HOST:PORT/DB); empty: none"
    )
    add("redis-prefix", EdgeConfig.redis_prefix, "prefix of the rate-limit keys in Redis")
    add(
        "redis-timeout",
        str(EdgeConfig.redis_timeout),
        "seconds Redis has to answer before a request's limit falls back to this edge's own bucket",
    )
    add(
        "denial-cache-size",
        str(DENIAL_CACHE_SIZE),
        "denials of unknown keys cached at most, least recently used evicted first (0: none cached)",
    )
    add("stream-ping-seconds", "20", 'seconds between {"type": "ping"} frames on /v1/stream')
    add(
        "keep-alive-timeout",
        str(EdgeConfig.keep_alive_timeout),
        "seconds an idle keep-alive connection stays open",
    )
    add(
        "header-timeout",
        str(EdgeConfig.header_timeout),
        "seconds a client has to send a complete request head (a new connection's first: from connect)",
    )
    add(
        "body-timeout",
        str(EdgeConfig.body_timeout),
        "seconds a client has to send a request's whole body, counted from the end of its head",
    )
    add(
        "upstream-timeout",
        str(EdgeConfig.upstream_timeout),
        "seconds a product upstream has to answer before the request is answered 503",
    )
    add("sandbox-confirm-seconds", "0.5", "seconds between a sandbox booking's 202 and its outcome event")
    add("log-level", "INFO", "DEBUG, INFO, WARNING or ERROR")
    add("shutdown-grace", "5", "seconds running requests may finish after SIGTERM")
    add_tls_args(s, "edge")
    return parser


def _hosts(flag: str, listen: str, port: int) -> list[str]:
    return [h for h in flag.split(",") if h.strip()] or listen_hosts(listen.rpartition(":")[0], port)


def config_from(args: argparse.Namespace, ports: Sequence[int] | None = None) -> EdgeConfig:
    """``ports``: the ports the listeners bound (port 0 picks one); default: those the flags name."""
    listens = (args.live_listen, args.sandbox_listen)
    live_port, sandbox_port = ports or [int(listen.rpartition(":")[2]) for listen in listens]
    routes = RouteTable.load(args.routes) if args.routes else EdgeConfig().routes
    addresses = args.authsvc or [_env("authsvc", "127.0.0.1:50051")]
    auth_target(addresses)  # a bad address list stops the start here, with its message
    return EdgeConfig(
        authsvc=",".join(addresses),
        webhookd=args.webhookd,
        database=normalize_url(args.database),
        live_hosts=_hosts(args.live_hosts, args.live_listen, live_port),
        sandbox_hosts=_hosts(args.sandbox_hosts, args.sandbox_listen, sandbox_port),
        trusted_proxies=parse_networks(args.trusted_proxy),
        routes=routes,
        docs_base=args.docs_base.rstrip("/"),
        max_body_bytes=int(args.max_body_bytes),
        stream_ping_seconds=float(args.stream_ping_seconds),
        sandbox_confirm_seconds=float(args.sandbox_confirm_seconds),
        rate_limit_live=float(args.rate_limit_live),
        rate_limit_sandbox=float(args.rate_limit_sandbox),
        redis=args.redis,
        redis_prefix=args.redis_prefix,
        redis_timeout=float(args.redis_timeout),
        denial_cache_size=int(args.denial_cache_size),
        keep_alive_timeout=float(args.keep_alive_timeout),
        header_timeout=float(args.header_timeout),
        body_timeout=float(args.body_timeout),
        upstream_timeout=float(args.upstream_timeout),
        tls=tls_from_args(args),
        idempotency_key=key_from(
            args.idempotency_key_file, _env("idempotency-key", ""), "--idempotency-key-file"
        ),
    )


async def serve(args: argparse.Namespace) -> None:
    socks = [bind(args.live_listen), bind(args.sandbox_listen)]
    config = config_from(args, [s.getsockname()[1] for s in socks])
    app = create_app(config)
    running = await start(app, socks, protocol=EdgeProtocol)
    metrics_port = serve_metrics(args.metrics_listen) if args.metrics_listen else None
    log.info("edge serving", extra={"live_port": running.ports[0], "sandbox_port": running.ports[1]})
    print_ready("edge", live_port=running.ports[0], sandbox_port=running.ports[1], metrics_port=metrics_port)

    async def stop() -> None:
        log.info("edge stopping")
        await running.stop(float(args.shutdown_grace))

    await run_until_signal(stop)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "new-idempotency-key":
        print(new_key())
        return 0
    setup_logging("edge", args.log_level)
    try:
        uvloop.run(serve(args))
    except (RouteTableError, ValueError, OSError, SealingKeyError) as exc:
        log.error("edge could not start", extra={"error": str(exc)})
        print(f"edge: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
