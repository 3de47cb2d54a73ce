"""python -m portal serve: the partner web portal."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any

from portal.app import PortalConfig, create_app
from svckit import addresses, runner
from svckit.clients.channels import target
from svckit.connlimits import add_connection_args, limits_from_args
from svckit.flags import FlagParser, add_flag, config_default, env_name
from svckit.logs import setup_logging
from svckit.metrics import serve_metrics
from svckit.pacing import add_pacing_args, pacing_from_args
from svckit.runner import ServeConfig, freeze_startup, print_ready, run_until_signal, stop_signals
from svckit.secretbox import SealingKeyError, key_from, new_key
from svckit.smtp import add_smtp_flags, settings_from_args
from svckit.tlsflags import add_tls_args, tls_from_args
from svckit.webserver import start

SERVICE = "portal"
# The CSRF key itself, when no --csrf-key-file is given.
CSRF_KEY_ENV = env_name(SERVICE, "csrf_key")

log = logging.getLogger(SERVICE)


def build_parser() -> argparse.ArgumentParser:
    """``serve`` and ``new-csrf-key``; every ``serve`` flag falls back to ``PORTAL_<FLAG>`` in the
    environment and defaults to the field of ``PortalConfig`` (or ``ServeConfig``, or the address of
    svckit.addresses) it sets."""
    parser = FlagParser(prog="python -m portal", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("new-csrf-key", help="print a new key for --csrf-key-file")
    s = sub.add_parser("serve", help="serve the portal over HTTP")

    def flag(name: str, **kwargs: Any) -> None:
        add_flag(s, f"--{name}", env=env_name(SERVICE, name), **kwargs)

    flag("listen", default=addresses.PORTAL, help="HTTP listen address HOST:PORT (port 0 picks one)")
    flag(
        "public-url",
        default="",
        help="URL partners open (invite links; https:// makes cookies Secure); default http://<listen>",
    )
    several = (
        "; several processes: IP:PORT addresses comma-separated, or one dns:///NAME:PORT resolving to "
        "several (round robin with failover)"
    )
    flag(
        "authsvc",
        default=config_default(PortalConfig, "authsvc"),
        help=f"authsvc gRPC address HOST:PORT{several}",
    )
    flag(
        "webhookd",
        default=config_default(PortalConfig, "webhookd"),
        help=f"webhookd gRPC address HOST:PORT{several}",
    )
    flag(
        "smtp-host",
        default=config_default(PortalConfig, "smtp_host"),
        help="SMTP server for invitation e-mails; empty shows the invite link on the page",
    )
    flag("smtp-port", type=int, default=config_default(PortalConfig, "smtp_port"), help="SMTP port")
    add_smtp_flags(s, SERVICE)
    flag(
        "mail-from",
        default=config_default(PortalConfig, "mail_from"),
        help="From address of invitation e-mails",
    )
    flag(
        "metrics-listen",
        default=addresses.PORTAL_METRICS,
        help="Prometheus /metrics HOST:PORT, empty to disable",
    )
    flag("log-level", default=config_default(ServeConfig, "log_level"), help="DEBUG, INFO, WARNING or ERROR")
    flag(
        "shutdown-grace",
        type=float,
        default=config_default(ServeConfig, "shutdown_grace"),
        help="seconds running requests may finish after SIGTERM",
    )
    flag(
        "csrf-key-file",
        default="",
        help="file with the key of the CSRF tokens (base64url of 32 bytes; or the key itself in "
        f"{CSRF_KEY_ENV}; `python -m portal new-csrf-key` makes one); default a random key per process",
    )
    add_pacing_args(s, SERVICE, "a session")
    add_connection_args(s, SERVICE)
    add_tls_args(s, SERVICE)
    return parser


async def serve(args: argparse.Namespace) -> None:
    listen = args.listen
    target(args.authsvc, "--authsvc")  # a bad address list stops the start here, with its message
    target(args.webhookd, "--webhookd")
    config = PortalConfig(
        authsvc=args.authsvc,
        webhookd=args.webhookd,
        public_url=args.public_url,
        smtp_host=args.smtp_host,
        smtp_port=args.smtp_port,
        mail_from=args.mail_from,
        smtp=settings_from_args(args, SERVICE, args.smtp_host, args.smtp_port, args.mail_from)
        if args.smtp_host
        else None,
        tls=tls_from_args(args),
        csrf_key=key_from(args.csrf_key_file or "", os.environ.get(CSRF_KEY_ENV, ""), "--csrf-key-file"),
        pacing=pacing_from_args(args),
        connections=limits_from_args(args),
    )
    app = create_app(config)
    running = await start(app, [listen], limits=config.connections)
    port = running.ports[0]
    if not config.public_url:
        host = listen.rpartition(":")[0] or "127.0.0.1"
        config.public_url = f"http://{host}:{port}"  # known once the port is bound
    metrics_port = serve_metrics(args.metrics_listen) if args.metrics_listen else None
    log.info("portal serving", extra={"port": port, "public_url": config.public_url})
    freeze_startup()
    stop_signals()  # before READY: a SIGTERM on reading it is a graceful stop
    print_ready("portal", port=port, url=config.public_url, metrics_port=metrics_port)

    async def stop() -> None:
        log.info("portal stopping")
        await running.stop(args.shutdown_grace)

    await run_until_signal(stop)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "new-csrf-key":
        print(new_key())
        return 0
    setup_logging(SERVICE, args.log_level)
    try:
        # asyncio's own loop: uvloop measured no better under the sign-in flood (docs/portal.md).
        runner.run(serve(args), uvloop=False)
    except (ValueError, OSError, SealingKeyError) as exc:
        print(f"portal: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
