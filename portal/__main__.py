"""python -m portal serve: the partner web portal."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys

from portal.app import PortalConfig, create_app
from svckit.logs import setup_logging
from svckit.metrics import serve_metrics
from svckit.runner import env_name, print_ready, run_until_signal
from svckit.secretbox import SealingKeyError, key_from, new_key
from svckit.tls import add_tls_args, tls_from_args
from svckit.webserver import start

log = logging.getLogger("portal")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m portal", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("new-csrf-key", help="print a new key for --csrf-key-file")
    s = sub.add_parser("serve", help="serve the portal over HTTP")

    def add(flag: str, default: str, help: str) -> None:
        env = env_name("portal", flag)
        s.add_argument(f"--{flag}", default=os.environ.get(env, default), help=f"{help} (env {env})")

    add("listen", "127.0.0.1:8090", "HTTP listen address HOST:PORT (port 0 picks one)")
    add(
        "public-url",
        "",
        "URL partners open (invite links; https:// makes cookies Secure); default http://<listen>",
    )
    add("authsvc", "127.0.0.1:50051", "authsvc gRPC target")
    add("webhookd", "127.0.0.1:50052", "webhookd gRPC target")
    add("smtp-host", "", "SMTP server for invitation e-mails; empty shows the invite link on the page")
    add("smtp-port", "25", "SMTP port")
    add("mail-from", "portal@svc.travel", "From address of invitation e-mails")
    add("metrics-listen", "127.0.0.1:9104", "Prometheus /metrics HOST:PORT, empty to disable")
    add("log-level", "INFO", "DEBUG, INFO, WARNING or ERROR")
    add("shutdown-grace", "5", "seconds running requests may finish after SIGTERM")
    add(
        "csrf-key-file",
        "",
        "file with the key of the CSRF tokens (base64url of 32 bytes; or the key itself in PORTAL_CSRF_KEY; "
        "`python -m portal new-csrf-key` makes one); default a random key per process",
    )
    add_tls_args(s, "portal")
    return parser


async def serve(args: argparse.Namespace) -> None:
    listen = args.listen
    config = PortalConfig(
        authsvc=args.authsvc,
        webhookd=args.webhookd,
        public_url=args.public_url,
        smtp_host=args.smtp_host,
        smtp_port=int(args.smtp_port),
        mail_from=args.mail_from,
        tls=tls_from_args(args),
        csrf_key=key_from(args.csrf_key_file, os.environ.get("PORTAL_CSRF_KEY", ""), "--csrf-key-file"),
    )
    app = create_app(config)
    running = await start(app, [listen])
    port = running.ports[0]
    if not config.public_url:
        host = listen.rpartition(":")[0] or "127.0.0.1"
        config.public_url = f"http://{host}:{port}"  # known once the port is bound
    metrics_port = serve_metrics(args.metrics_listen) if args.metrics_listen else None
    log.info("portal serving", extra={"port": port, "public_url": config.public_url})
    print_ready("portal", port=port, url=config.public_url, metrics_port=metrics_port)

    async def stop() -> None:
        log.info("portal stopping")
        await running.stop(float(args.shutdown_grace))

    await run_until_signal(stop)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "new-csrf-key":
        print(new_key())
        return 0
    setup_logging("portal", args.log_level)
    try:
        asyncio.run(serve(args))
    except (ValueError, OSError, SealingKeyError) as exc:
        print(f"portal: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
