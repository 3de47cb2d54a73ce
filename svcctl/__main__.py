"""``svcctl [--authsvc HOST:PORT] [--webhookd HOST:PORT] [--actor USER] GROUP COMMAND ...``

Command groups register themselves from ``svcctl.auth_commands`` and ``svcctl.webhook_commands``:
each module has ``register(subparsers)`` and sets ``handler`` (an async function of the parsed
arguments returning an exit code) on its parsers.
"""

from __future__ import annotations

import asyncio
import getpass
import importlib
import sys
from typing import Any

from svckit import addresses
from svckit.clients import ClientError
from svckit.flags import FlagParser, add_flag, env_name
from svckit.tlsflags import add_tls_args

SERVICE = "svcctl"

COMMAND_MODULES = (
    "svcctl.auth_commands",
    "svcctl.webhook_commands",
    "svcctl.certs_commands",
    "svcctl.health_commands",
    "svcctl.user_commands",
    "svcctl.ledger_commands",
    "svcctl.scanning_commands",
    "svcctl.usage_commands",
    "svcctl.certify_commands",
)


def build_parser() -> FlagParser:
    """Every global flag falls back to ``SVCCTL_<FLAG>`` in the environment; the addresses default to
    ``svckit.addresses``, the actor to ``ops:<login>``."""
    parser = FlagParser(prog="svcctl", description=(__doc__ or "").splitlines()[0])

    def flag(name: str, **kwargs: Any) -> None:
        add_flag(parser, f"--{name}", env=env_name(SERVICE, name), **kwargs)

    several = "; several processes: IP:PORT addresses comma-separated (round robin with failover)"
    flag("authsvc", default=addresses.AUTHSVC, help=f"authsvc gRPC address{several}")
    flag("webhookd", default=addresses.WEBHOOKD, help=f"webhookd gRPC address{several}")
    flag(
        "actor",
        default=f"ops:{getpass.getuser()}",
        help="who is acting, written to the audit trail",
    )
    flag(
        "portal-url",
        default=f"http://{addresses.PORTAL}",
        help="the portal's public URL, for the links `users invite` prints",
    )
    add_tls_args(parser, SERVICE)
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
