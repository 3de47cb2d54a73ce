"""python -m edge serve: the live and sandbox listeners of the partner gateway in one process."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from edge.app import create_app
from edge.config import DEFAULT_LIVE_LISTEN, DEFAULT_SANDBOX_LISTEN, EdgeConfig
from edge.environments import listen_hosts
from edge.migrations import SCHEMA as EDGE_SCHEMA
from edge.routetable import RouteTable, RouteTableError
from edge.secretscanning import ScanningConfig, gitlab_digest
from edge.server import EdgeProtocol
from edge.sources import parse_networks
from edge.upstream import check_routes, signing_key
from edge.workers import follow_parent, supervise
from svckit import addresses, runner, tracing
from svckit.apikeys import DEFAULT_BRAND, KEY_PREFIXES_HELP, parse_brands
from svckit.clients.auth import auth_target
from svckit.clients.channels import target
from svckit.connlimits import add_connection_args, limits_from_args
from svckit.db import add_password_file_flag, normalize_url
from svckit.flags import FlagParser, add_flag, config_default, csv_list, env_name
from svckit.logs import setup_logging
from svckit.metrics import serve_metrics
from svckit.migrations import SchemaError, add_migrate_command, run_migrate
from svckit.pacing import add_pacing_args, pacing_from_args
from svckit.runner import ServeConfig, freeze_startup, or_default, print_ready, run_until_signal, stop_signals
from svckit.secretbox import SealingKeyError, key_from, new_key
from svckit.tlsflags import add_tls_args, tls_from_args
from svckit.webserver import bind, start

log = logging.getLogger("edge")

SERVICE = "edge"
# The sealing key itself, when no --idempotency-key-file names a file holding it (never a flag).
IDEMPOTENCY_KEY_ENV = env_name(SERVICE, "idempotency-key")


# A rate limit flag's help: what it applies to.
_PER = "a key without its own limit (bursts of 2 s; per edge process, or across edges with --redis), 0: none"
# Flags that set the EdgeConfig field of their name (``-`` as ``_``) as given, defaulting to it: (flag, type,
# help), in --help order. build_parser adds them and config_from passes them on, each from this one row.
Setting = tuple[str, Callable[[str], Any], str]
GATE_SETTINGS: tuple[Setting, ...] = (
    (
        "docs-dir",
        str,
        "directory of the partner docs' Markdown served at /docs (default: the repository's docs/)",
    ),
    ("max-body-bytes", int, "largest request body accepted (413 above)"),
    ("rate-limit-live", float, f"requests/s per live key: {_PER}"),
    ("rate-limit-sandbox", float, f"requests/s per test key: {_PER}"),
    ("redis", str, "Redis URL sharing per-key rate limits between edges (redis://HOST:PORT/DB); empty: none"),
    ("redis-prefix", str, "prefix of the rate-limit keys in Redis"),
    (
        "redis-timeout",
        float,
        "seconds Redis has to answer before a request's limit falls back to this edge's own bucket",
    ),
    (
        "denial-cache-size",
        int,
        "denials of unknown keys cached at most, least recently used evicted first (0: none cached)",
    ),
    (
        "usage-flush-interval",
        float,
        "seconds between flushes of the exact usage counts to authsvc: the most a killed edge loses",
    ),
    (
        "unknown-key-rate",
        float,
        "look-ups of keys authsvc does not know allowed per client address a second (then 429)",
    ),
    ("unknown-key-burst", int, "look-ups of keys authsvc does not know allowed per client address at once"),
)
STREAM_AND_TIMEOUT_SETTINGS: tuple[Setting, ...] = (
    ("stream-ping-seconds", float, 'seconds between {"type": "ping"} frames on /v1/stream'),
    (
        "request-log-successes",
        int,
        "successful requests filed in the request log per second by this process (errors and reads "
        "of whole events, GET /v1/events/{id}, always are); 0: none",
    ),
    (
        "stream-max-per-key",
        int,
        "open /v1/stream connections per API key, per edge process (one more: 429), 0: no limit",
    ),
    (
        "stream-max-per-account",
        int,
        "open /v1/stream connections per account (all its keys), per edge "
        "process (one more: 429), 0: no limit",
    ),
    (
        "stream-messages-per-second",
        float,
        "messages a second a /v1/stream client may send (bursts: "
        "--stream-message-burst); past it the connection is closed with 1008, 0: no limit",
    ),
    (
        "stream-message-burst",
        int,
        "messages a /v1/stream client may send at once before --stream-messages-per-second applies",
    ),
    (
        "stream-opens-per-second",
        float,
        "new /v1/stream connections a second per account (bursts: "
        "--stream-open-burst); past it 429 rate_limited before the upgrade, 0: no limit",
    ),
    (
        "stream-open-burst",
        int,
        "new /v1/stream connections an account may open at once before --stream-opens-per-second",
    ),
    (
        "stream-max-message-bytes",
        int,
        "largest message a /v1/stream client may send (larger: closed with 1009)",
    ),
    ("keep-alive-timeout", float, "seconds an idle keep-alive connection stays open"),
    (
        "header-timeout",
        float,
        "seconds a client has to send a complete request head (a new connection's first: from connect)",
    ),
    (
        "body-timeout",
        float,
        "seconds a client has to send a request's whole body, counted from the end of its head",
    ),
    (
        "upstream-timeout",
        float,
        "seconds a product upstream has to answer before the request is answered 503",
    ),
    ("sandbox-confirm-seconds", float, "seconds between a sandbox booking's 202 and its outcome event"),
    (
        "workers",
        int,
        "edge processes sharing the listeners' ports (SO_REUSEPORT) under a supervising parent; "
        "worker i serves /metrics on the --metrics-listen port + i",
    ),
)


def build_parser() -> FlagParser:
    """``serve`` and ``new-idempotency-key``; every ``serve`` flag falls back to ``EDGE_<FLAG>`` in the
    environment and defaults to the field of ``EdgeConfig`` it sets (addresses: ``svckit.addresses``)."""
    parser = FlagParser(prog="python -m edge", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("new-idempotency-key", help="print a new key for --idempotency-key-file")
    add_migrate_command(sub, SERVICE, config_default(EdgeConfig, "database"))
    s = sub.add_parser("serve", help="serve the live and sandbox listeners")

    def flag(name: str, **kwargs: Any) -> None:
        add_flag(s, f"--{name}", env=env_name(SERVICE, name), **kwargs)

    def default(name: str) -> Any:
        return config_default(EdgeConfig, name)

    flag("live-listen", default=DEFAULT_LIVE_LISTEN, help="live listener HOST:PORT (port 0 picks one)")
    flag(
        "sandbox-listen", default=DEFAULT_SANDBOX_LISTEN, help="sandbox listener HOST:PORT (port 0 picks one)"
    )
    follow = "default: localhost and the loopback address (or the listen address) at the {} listener's port"
    flag(
        "live-hosts", default="", help=f"comma-separated Host values that mean live ({follow.format('live')})"
    )
    flag(
        "sandbox-hosts",
        default="",
        help=f"comma-separated Host values that mean sandbox ({follow.format('sandbox')})",
    )
    flag(
        "authsvc",
        repeat=True,
        default=csv_list(default("authsvc")),
        help=f"authsvc gRPC address HOST:PORT (default {default('authsvc')}); several authsvc processes: "
        "IP:PORT addresses comma-separated or the flag repeated, or one dns:///NAME:PORT resolving to "
        "several (round robin, failover of calls and of the key-change watch)",
    )
    flag(
        "webhookd",
        repeat=True,
        default=csv_list(default("webhookd")),
        help=f"webhookd gRPC address HOST:PORT (default {default('webhookd')}); several webhookd processes: "
        "IP:PORT addresses comma-separated or the flag repeated, or one dns:///NAME:PORT resolving to "
        "several (round robin, failover of calls and of /v1/stream's subscriptions)",
    )
    database = default("database")
    flag(
        "database",
        also_env=("DATABASE_URL",),
        type=or_default(database),
        default=database,
        help="idempotency store URL: sqlite+aiosqlite:///path or postgresql+asyncpg://...",
    )
    add_password_file_flag(s, SERVICE)
    flag(
        "metrics-listen",
        default=addresses.EDGE_METRICS,
        help="Prometheus /metrics HOST:PORT, empty to disable",
    )
    flag(
        "idempotency-key-file",
        default="",
        help="file with the key sealing stored idempotent responses (AES-256, base64url; or the key itself "
        f"in {IDEMPOTENCY_KEY_ENV}; `python -m edge new-idempotency-key` makes one)",
    )
    flag("trusted-proxy", repeat=True, help="CIDR or address of a trusted reverse proxy")
    flag("routes", default="", help="product route table JSON file (default: the built-in example table)")
    flag(
        "docs-base",
        default=default("docs_base"),
        help="base URL of the partner docs (docUrl: <base>/errors#<type>); default: this edge's own "
        "/docs on the host the request came to",
    )
    for name, kind, text in GATE_SETTINGS:
        flag(name, type=kind, default=default(name.replace("-", "_")), help=text)
    flag(
        "no-usage-counts",
        switch=True,
        help="count no usage (GET /v1/usage then shows nothing of this edge's requests; for measurements)",
    )
    add_pacing_args(s, SERVICE, "an accepted key")
    add_connection_args(s, SERVICE)
    for name, kind, text in STREAM_AND_TIMEOUT_SETTINGS:
        flag(name, type=kind, default=default(name.replace("-", "_")), help=text)
    flag(
        "upstream-signing-key-file",
        default="",
        help="Ed25519 private key (PEM): sign each product request's identity for upstreams behind a "
        "TLS-terminating proxy (X-Edge-Assertion); empty: none",
    )
    flag("key-prefixes", default=DEFAULT_BRAND, help=KEY_PREFIXES_HELP)
    flag(
        "secret-scanning-github-path",
        default=config_default(ScanningConfig, "github_path"),
        help="path of the live host's route receiving GitHub's secret scanning reports",
    )
    flag(
        "secret-scanning-github-keys",
        default=config_default(ScanningConfig, "github_keys"),
        help="GitHub's secret-scanning public keys: their URL, or a file holding the same JSON",
    )
    flag(
        "secret-scanning-gitlab-token-file",
        default="",
        help="file holding the hex SHA-256 of the token GitLab's token revocation sends; empty: every GitLab "
        "request is refused (401)",
    )
    s.add_argument("--reuse-port", action="store_true", help=argparse.SUPPRESS)  # set by edge.workers
    flag("log-level", default=config_default(ServeConfig, "log_level"), help="DEBUG, INFO, WARNING or ERROR")
    flag(
        "shutdown-grace",
        type=float,
        default=config_default(ServeConfig, "shutdown_grace"),
        help="seconds running requests may finish after SIGTERM",
    )
    add_tls_args(s, SERVICE)
    tracing.add_tracing_args(s, SERVICE)
    return parser


def _settings() -> list[str]:
    """The EdgeConfig fields the settings' flags set as given."""
    return [name.replace("-", "_") for name, _, _ in (*GATE_SETTINGS, *STREAM_AND_TIMEOUT_SETTINGS)]


def _hosts(flag: str, listen: str, port: int) -> list[str]:
    return [h for h in flag.split(",") if h.strip()] or listen_hosts(listen.rpartition(":")[0], port)


def config_from(args: argparse.Namespace, ports: Sequence[int] | None = None) -> EdgeConfig:
    """``ports``: the ports the listeners bound (port 0 picks one); default: those the flags name."""
    listens = (args.live_listen, args.sandbox_listen)
    live_port, sandbox_port = ports or [int(listen.rpartition(":")[2]) for listen in listens]
    routes = RouteTable.load(args.routes) if args.routes else EdgeConfig().routes
    tls = tls_from_args(args)
    check_routes(routes, tls)  # https upstreams only, unless --insecure-dev
    authsvc = args.authsvc or csv_list(EdgeConfig.authsvc)
    auth_target(authsvc)  # a bad address list stops the start here, with its message
    webhookd = args.webhookd or csv_list(EdgeConfig.webhookd)
    target(webhookd, "--webhookd")  # the same for webhookd's
    return EdgeConfig(
        authsvc=",".join(authsvc),
        webhookd=",".join(webhookd),
        database=normalize_url(args.database),
        live_hosts=_hosts(args.live_hosts, args.live_listen, live_port),
        sandbox_hosts=_hosts(args.sandbox_hosts, args.sandbox_listen, sandbox_port),
        trusted_proxies=parse_networks(args.trusted_proxy),
        routes=routes,
        docs_base=args.docs_base.rstrip("/"),
        usage_counts=not args.no_usage_counts,
        pacing=pacing_from_args(args),
        connections=limits_from_args(args),
        upstream_signing_key=signing_key(args.upstream_signing_key_file),
        **{field: getattr(args, field) for field in _settings()},
        key_prefixes=parse_brands(args.key_prefixes),
        secret_scanning=ScanningConfig(
            github_path=args.secret_scanning_github_path,
            github_keys=args.secret_scanning_github_keys,
            gitlab_token_sha256=gitlab_digest(args.secret_scanning_gitlab_token_file),
        ),
        tls=tls,
        idempotency_key=key_from(
            args.idempotency_key_file, os.environ.get(IDEMPOTENCY_KEY_ENV, ""), "--idempotency-key-file"
        ),
    )


async def serve(args: argparse.Namespace) -> None:
    socks = [bind(args.live_listen, args.reuse_port), bind(args.sandbox_listen, args.reuse_port)]
    config = config_from(args, [s.getsockname()[1] for s in socks])
    tracing.setup(SERVICE, args.otlp_endpoint)
    app = create_app(config)
    running = await start(app, socks, protocol=EdgeProtocol, limits=config.connections)
    metrics_port = serve_metrics(args.metrics_listen) if args.metrics_listen else None
    freeze_startup()  # (a larger first-generation threshold measured no better in the edge)
    log.info("edge serving", extra={"live_port": running.ports[0], "sandbox_port": running.ports[1]})
    stop_signals()  # before READY: a SIGTERM on reading it is a graceful stop
    print_ready("edge", live_port=running.ports[0], sandbox_port=running.ports[1], metrics_port=metrics_port)

    async def stop() -> None:
        log.info("edge stopping")
        await running.stop(args.shutdown_grace)

    await run_until_signal(stop)
    tracing.shutdown()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "migrate":
        return run_migrate(args, EDGE_SCHEMA)
    if args.command == "new-idempotency-key":
        print(new_key())
        return 0
    setup_logging("edge", args.log_level)
    if args.workers < 1:
        print("edge: --workers must be 1 or more", file=sys.stderr)
        return 2
    if args.workers > 1:
        try:
            return asyncio.run(
                supervise(
                    sys.argv[1:] if argv is None else argv,
                    args.workers,
                    args.live_listen,
                    args.sandbox_listen,
                    args.metrics_listen,
                )
            )
        except OSError as exc:
            print(f"edge: {exc}", file=sys.stderr)
            return 2
    if args.reuse_port:  # a worker of --workers N (edge.workers)
        follow_parent(os.getppid())
    try:
        runner.run(serve(args))
    except (RouteTableError, ValueError, OSError, SealingKeyError, SchemaError) as exc:
        log.error("edge could not start", extra={"error": str(exc)})
        print(f"edge: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
