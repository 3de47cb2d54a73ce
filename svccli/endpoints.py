"""``svc webhooks endpoints`` and ``svc webhooks add``: a partner's endpoints with where their deliveries
go, and a new one of any destination type (docs/webhooks.md "Destinations"), over the edge's HTTP API.

  svc webhooks endpoints
  svc webhooks add --event booking.confirmed --url https://partner.example/hooks
  svc webhooks add --event '*' --amqp-url amqps://svc@rabbit.partner.example/travel --amqp-exchange travel \\
                   --amqp-routing-key bookings --password-file amqp.pw
  svc webhooks add --event '*' --nats-server tls://nats.partner.example:4222 --nats-subject travel.bookings
  svc webhooks add --event '*' --polling

A broker password or token is read from a file (``-``: standard input), never taken on the command line;
nothing prints it (the API never returns it).
"""

from __future__ import annotations

import argparse
import sys
import uuid
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx


def add_parsers(cmds: Any) -> None:
    cmds.add_parser("endpoints", help="the account's endpoints and where their deliveries go")
    add = cmds.add_parser("add", help="register an endpoint: https, RabbitMQ, NATS JetStream or polling")
    add.add_argument("--event", action="append", required=True, help="event kind, or * for all; repeat")
    add.add_argument("--description", default="")
    where = add.add_mutually_exclusive_group(required=True)
    where.add_argument("--url", help="an https:// receiver (type http)")
    where.add_argument("--amqp-url", help="amqp://user@host:5672/vhost or amqps:// (type amqp)")
    where.add_argument("--nats-server", action="append", help="nats:// or tls:// URL, repeat (type nats)")
    where.add_argument("--polling", action="store_true", help="nothing is sent: you poll (type polling)")
    add.add_argument("--amqp-exchange", default="")
    add.add_argument("--amqp-routing-key", default="")
    add.add_argument("--nats-subject", default="")
    add.add_argument("--nats-user", default="")
    add.add_argument("--password-file", help="the broker password (-: standard input)")
    add.add_argument("--token-file", help="a NATS token instead of user and password (-: standard input)")


def _secret(path: str | None) -> str:
    if not path:
        return ""
    if path == "-":
        return sys.stdin.read().strip()
    with open(path, encoding="utf-8") as f:
        return f.read().strip()


def body_of(args: argparse.Namespace) -> dict[str, Any]:
    """The ``POST /v1/webhooks/endpoints`` body of ``svc webhooks add``'s flags."""
    body: dict[str, Any] = {"events": args.event}
    if args.description:
        body["description"] = args.description
    if args.url:
        body["url"] = args.url
    elif args.amqp_url:
        body["type"] = "amqp"
        body["amqp"] = {
            "url": args.amqp_url,
            "exchange": args.amqp_exchange,
            "routingKey": args.amqp_routing_key,
        }
        if args.password_file:
            body["amqp"]["password"] = _secret(args.password_file)
    elif args.nats_server:
        body["type"] = "nats"
        body["nats"] = {"servers": args.nats_server, "subject": args.nats_subject}
        for name, value in (
            ("user", args.nats_user),
            ("password", _secret(args.password_file)),
            ("token", _secret(args.token_file)),
        ):
            if value:
                body["nats"][name] = value
    else:
        body["type"] = "polling"
    return body


def destination_line(ep: dict[str, Any]) -> str:
    """One endpoint as ``svc webhooks endpoints`` prints it."""
    kind = ep.get("type") or "http"
    if kind == "amqp" and ep.get("amqp"):
        a = ep["amqp"]
        where = f"exchange {a['exchange'] or '(default)'} routing key {a['routingKey']} at {a['url']}"
    elif kind == "nats" and ep.get("nats"):
        where = f"subject {ep['nats']['subject']} at {' '.join(ep['nats']['servers'])}"
    else:
        where = ep.get("url") or ""
    return f"{ep['id']} {ep['status']} {kind} {where}".rstrip()


async def run(http: httpx.AsyncClient, args: argparse.Namespace, fail: Any) -> int:
    if args.webhooks_command == "endpoints":
        params: dict[str, str] = {"limit": "100"}
        while True:
            resp = await http.get("/v1/webhooks/endpoints", params=params)
            if resp.status_code != 200:
                return int(fail("endpoints", resp))
            page = resp.json()
            for ep in page["data"]:
                print(destination_line(ep))
            if not page.get("nextPageToken"):
                return 0
            params["page_token"] = page["nextPageToken"]
    resp = await http.post(
        "/v1/webhooks/endpoints", headers={"Idempotency-Key": f"svc-{uuid.uuid4()}"}, json=body_of(args)
    )
    if resp.status_code != 201:
        return int(fail("add", resp))
    made = resp.json()
    print(destination_line(made))
    print(f"signing secret (shown once): {made['secret']}")
    return 0
