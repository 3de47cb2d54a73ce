"""``svcctl [--authsvc HOST:PORT] [--webhookd HOST:PORT] [--actor USER] GROUP COMMAND ...``

Command groups register themselves from ``svcctl.auth_commands`` and ``svcctl.webhook_commands``:
each module has ``register(subparsers)`` and sets ``handler`` (an async function of the parsed
arguments returning an exit code) on its parsers.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import importlib
import os
import sys

from svckit.clients import ClientError
from svckit.tls import add_tls_args

COMMAND_MODULES = ("svcctl.auth_commands", "svcctl.webhook_commands", "svcctl.certs_commands")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="svcctl", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--authsvc",
        default=os.environ.get("SVCCTL_AUTHSVC", "127.0.0.1:50051"),
        help="authsvc gRPC address (env SVCCTL_AUTHSVC)",
    )
    parser.add_argument(
        "--webhookd",
        default=os.environ.get("SVCCTL_WEBHOOKD", "127.0.0.1:50052"),
        help="webhookd gRPC address (env SVCCTL_WEBHOOKD)",
    )
    parser.add_argument(
        "--actor",
        default=os.environ.get("SVCCTL_ACTOR") or f"ops:{getpass.getuser()}",
        help="who is acting, written to the audit trail (env SVCCTL_ACTOR)",
    )
    add_tls_args(parser, "svcctl")
    groups = parser.add_subparsers(dest="group", required=True, metavar="GROUP")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        module.register(groups)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(asyncio.run(args.handler(args)))
    except ClientError as exc:
        print(f"error: {exc.type}: {exc.detail}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
