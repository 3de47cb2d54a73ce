"""``svcctl webhooks register|update``'s destination flags (docs/webhooks.md "Destinations"): the type
and the RabbitMQ or NATS settings. A password or token is read from a file (``-``: standard input), never
taken on the command line, where the process list and the shell's history would keep it."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from svckit.prototables import DESTINATION_TYPE
from svckit.webhook_status import DestinationType
from travel.webhooks.v1 import webhooks_pb2 as pb

TYPES = [t.value for t in DestinationType]
AMQP_FLAGS = ("amqp_url", "amqp_exchange", "amqp_routing_key", "amqp_password_file")
NATS_FLAGS = ("nats_server", "nats_subject", "nats_user", "nats_password_file", "nats_token_file")


def add_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--type", choices=TYPES, help="where deliveries go (default: http, to --url)")
    p.add_argument("--amqp-url", help="amqp://user@host:5672/vhost or amqps://; no password in it")
    p.add_argument("--amqp-exchange", help="the partner's exchange")
    p.add_argument("--amqp-routing-key")
    p.add_argument("--amqp-password-file", help="a file holding the AMQP password (-: standard input)")
    p.add_argument("--nats-server", action="append", help="nats:// or tls:// URL; repeat for a cluster")
    p.add_argument("--nats-subject", help="a subject a JetStream stream of the partner's captures")
    p.add_argument("--nats-user")
    p.add_argument("--nats-password-file", help="a file holding the NATS password (-: standard input)")
    p.add_argument("--nats-token-file", help="a file holding the NATS token (-: standard input)")


def _secret(path: str | None) -> str:
    if not path:
        return ""
    text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()
    return text.strip()


def _given(a: argparse.Namespace, names: tuple[str, ...]) -> bool:
    return any(getattr(a, n) is not None for n in names)


def request_fields(a: argparse.Namespace) -> dict[str, Any]:
    """The RegisterEndpointRequest / UpdateEndpointRequest fields of the flags given."""
    out: dict[str, Any] = {}
    if a.type:
        out["type"] = DESTINATION_TYPE.pb(a.type)
    if _given(a, AMQP_FLAGS):
        out["amqp"] = pb.AmqpDestination(
            url=a.amqp_url or "",
            exchange=a.amqp_exchange or "",
            routing_key=a.amqp_routing_key or "",
            password=_secret(a.amqp_password_file),
        )
    if _given(a, NATS_FLAGS):
        out["nats"] = pb.NatsDestination(
            servers=a.nats_server or [],
            subject=a.nats_subject or "",
            user=a.nats_user or "",
            password=_secret(a.nats_password_file),
            token=_secret(a.nats_token_file),
        )
    return out


def update_paths(a: argparse.Namespace) -> list[str]:
    """The update mask's paths of the destination flags given (amqp/nats settings are replaced whole: give
    all of them; a password file left out keeps the stored password)."""
    paths = ["type"] if a.type else []
    if _given(a, AMQP_FLAGS):
        paths.append("amqp")
    if _given(a, NATS_FLAGS):
        paths.append("nats")
    return paths
