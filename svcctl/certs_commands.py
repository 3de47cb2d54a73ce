"""``svcctl certs init``: a development CA and one certificate per service (``svckit.devca``)."""

from __future__ import annotations

import argparse
import pathlib
from typing import Any

from svckit.devca import IDENTITIES, init_dir
from svckit.tls import DEV_DIR


async def _init(args: argparse.Namespace) -> int:
    identities = tuple(dict.fromkeys([*IDENTITIES, *(args.identity or [])]))
    written = init_dir(pathlib.Path(args.dir), identities)
    for path in written:
        print(f"wrote {path}")
    if not written:
        print(f"{args.dir}: every certificate exists; nothing written")
    return 0


def register(groups: Any) -> None:
    sub = groups.add_parser("certs", help="development certificates for mutual TLS").add_subparsers(
        dest="command", required=True
    )
    help = (
        "make a development CA and a certificate per service, svcctl and the portal in --dir (files "
        "already there are kept); for development only, production brings its own CA"
    )
    p = sub.add_parser("init", help=help, description=help)
    p.add_argument("--dir", default=DEV_DIR, help=f"directory of the files (default {DEV_DIR})")
    p.add_argument(
        "--identity",
        action="append",
        help="also a certificate for this identity, e.g. product:hotels (repeatable)",
    )
    p.set_defaults(handler=_init)
