"""svc: the partner's command line for the sandbox.

  svc listen --forward-to http://localhost:3000/webhooks [--events booking.*]
  svc trigger booking.cancelled            a sample event of a kind
  svc trigger --failure booking_failed     a product call carrying X-Sandbox-Trigger
  svc clock advance 2h                     what the sandbox's deliveries would do in 2 h, now
  svc verify --secret whsec_... --header 't=...,v1=...' < body.json
  svc verify --secret whsec_... --header 'webhook-id: evt_...' --header 'webhook-timestamp: ...' \
             --header 'webhook-signature: v1,...' < body.json       (Standard Webhooks headers)
  svc webhooks recover we_... --since 2h --dry-run   count what an endpoint missed (then without it)
  svc webhooks signing-keys                          the ed25519 public keys of v1a signatures
  svc poll we_... [--follow]               a polling endpoint's events: print each batch, commit it
  svc certify start|status|finish                    a certification run of this sandbox key
  svc certify report --out r.json; svc certify keys --out k.json; svc certify verify r.json --keys k.json

The API key comes from --api-key or SVC_API_KEY and is never printed.
"""

# A partner's tool: it imports svckit's vocabulary and signing and its own modules, never a service
# package (tests/unit/test_imports.py); the partner package carries copies of those svckit modules
# (scripts/build_partner_package). The network libraries load in the commands that use them, so
# `svc --help` and `svc verify` start fast.
from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, Any

from svccli import certify, poll, webhooks
from svccli.verification import verify_delivery
from svckit import addresses
from svckit.durations import clock_advance
from svckit.events import EVENT_KINDS, TRIGGER_HEADER, TRIGGER_NAMES, TRIGGER_STATUS
from svckit.flags import ArgumentError, FlagParser, add_flag, env_name
from svckit.resources import PRODUCTS
from svckit.signing import SIGNATURE_HEADER, SignatureScheme, WebhookVerificationError, new_secret

if TYPE_CHECKING:
    import httpx

SERVICE = "svc"
DEFAULT_BASE_URL = addresses.SANDBOX_URL
# What a failure trigger's request answers when it works.
EXPECTED_STATUS = TRIGGER_STATUS


def failure_request(trigger: str, product: str) -> tuple[str, str]:
    """(method, path) of the product call that exercises ``trigger``: a search for the search-quota
    trigger (and the two that apply anywhere), a booking or eSIM order creation for the others."""
    if trigger in ("rate_limited", "service_unavailable", "search_quota_exhausted"):
        if product == "esim":
            if trigger == "search_quota_exhausted":
                raise ValueError(
                    "search_quota_exhausted needs a search route: use --product hotels or flights"
                )
            return "GET", "/v1/esim/plans"
        return "GET", f"/v1/{product}/search"
    return "POST", "/v1/esim/orders" if product == "esim" else f"/v1/{product}/bookings"


def base_url(text: str) -> str:
    """An http:// or https:// URL with a host: the sandbox's address (``--base-url``)."""
    scheme, sep, rest = text.strip().partition("://")
    if not sep or scheme.lower() not in ("http", "https") or not rest.strip("/"):
        raise ArgumentError("expected an http:// or https:// URL")
    return text.strip()


def advance_span(text: str) -> str:
    """``svc clock advance``'s span (``30s``, ``5m``, ``2h``, ``1d``, ``1h30m``; 1 s to 7 days), checked
    here and sent as typed."""
    try:
        clock_advance(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text.strip()


def build_parser() -> FlagParser:
    """The global flags fall back to ``SVC_<FLAG>`` in the environment (the listen secret to
    SVC_WEBHOOK_SECRET); the sandbox's address defaults to ``svckit.addresses.SANDBOX_URL``."""
    parser = FlagParser(
        prog="svc",
        description=(__doc__ or "").splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_flag(parser, "--api-key", env=env_name(SERVICE, "api-key"), default="", help="a sandbox API key")
    add_flag(
        parser,
        "--base-url",
        env=env_name(SERVICE, "base-url"),
        type=base_url,
        default=DEFAULT_BASE_URL,
        help="the sandbox's address",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    listen = sub.add_parser("listen", help="forward the account's events to a local URL, signed")
    listen.add_argument("--forward-to", required=True, help="local URL receiving the signed POSTs")
    listen.add_argument(
        "--events",
        nargs="+",
        default=[],
        help="event kinds or families (booking.*), spaces or commas; default all",
    )
    add_flag(
        listen,
        "--secret",
        env=env_name(SERVICE, "webhook-secret"),
        default="",
        help="signing secret for the forwards (default: a new one, printed)",
    )
    listen.add_argument(
        "--signature-scheme",
        choices=[s.value for s in SignatureScheme],
        default=SignatureScheme.STRIPE.value,
        help="headers of the forwards, as an endpoint's signatureScheme: stripe (X-Service-Signature, "
        "the default), standard (Standard Webhooks) or both",
    )

    trig = sub.add_parser("trigger", help="publish a sample event, or force a failure")
    trig.add_argument("event", nargs="?", choices=EVENT_KINDS, metavar="EVENT_TYPE", help="event kind")
    trig.add_argument(
        "--failure", choices=TRIGGER_NAMES, help="an X-Sandbox-Trigger to send on a product call"
    )
    trig.add_argument("--product", choices=PRODUCTS, default="hotels", help="product of --failure's call")
    trig.add_argument("--data", default="", help="JSON object merged over the sample event's data")

    clock = sub.add_parser("clock", help="move the sandbox's delivery schedule forward")
    clock_sub = clock.add_subparsers(dest="clock_command", required=True)
    advance = clock_sub.add_parser(
        "advance", help="make what the sandbox's deliveries would do in that much time happen now"
    )
    advance.add_argument("by", type=advance_span, help="how far: 30s, 5m, 2h, 1d, 1h30m (up to 7d)")

    ver = sub.add_parser("verify", help="check a delivery's signature; the raw body on stdin")
    ver.add_argument("--secret", action="append", required=True, help="signing secret (repeatable)")
    ver.add_argument(
        "--header",
        action="append",
        required=True,
        help="the X-Service-Signature value, or 'Name: value' (repeatable: the three webhook-* headers)",
    )
    ver.add_argument("--tolerance", type=int, default=300, help="seconds of clock difference allowed")
    webhooks.add_parser(sub)
    poll.add_parser(sub)
    certify.add_parser(sub)
    return parser


def _headers(api_key: str, **extra: str) -> dict[str, str]:
    return {"Authorization": f"Svc {api_key}", "Accept": "application/json", **extra}


def _describe_error(resp: httpx.Response) -> str:
    try:
        err = resp.json()["error"]
        return f"{err['type']}: {err['message']}"
    except (ValueError, KeyError, TypeError):
        return resp.text[:200]


async def cmd_listen(args: argparse.Namespace) -> int:
    import httpx

    from svccli.listen import Fatal, Listener

    secret = args.secret or new_secret()
    print(f"Forwarding events to {args.forward_to}")
    print(f"Your webhook signing secret is {secret} (Ctrl-C to quit)", flush=True)

    def out(line: str) -> None:
        print(line, flush=True)

    async with httpx.AsyncClient(timeout=10) as http:
        events = [e.strip() for arg in args.events for e in arg.split(",") if e.strip()]
        listener = Listener(
            args.base_url,
            args.api_key,
            args.forward_to,
            secret,
            events,
            out,
            http,
            SignatureScheme(args.signature_scheme),
        )
        try:
            await listener.run()
        except Fatal as exc:
            print(f"svc listen: {exc}", file=sys.stderr)
            return 1
    return 0


async def cmd_trigger(args: argparse.Namespace) -> int:
    import json
    import uuid

    import httpx

    if bool(args.event) == bool(args.failure):
        print("svc trigger: give an event type or --failure NAME (one of them)", file=sys.stderr)
        return 2
    idem = {"Idempotency-Key": f"svc-{uuid.uuid4()}"}
    async with httpx.AsyncClient(base_url=args.base_url, timeout=30) as http:
        if args.event:
            body: dict[str, Any] = {"type": args.event}
            if args.data:
                try:
                    body["data"] = json.loads(args.data)
                except ValueError as exc:
                    print(f"svc trigger: --data is not JSON: {exc}", file=sys.stderr)
                    return 2
            resp = await http.post("/v1/sandbox/events", headers=_headers(args.api_key, **idem), json=body)
            if resp.status_code != 202:
                print(f"svc trigger: HTTP {resp.status_code} {_describe_error(resp)}", file=sys.stderr)
                return 1
            out = resp.json()
            event_id, count = out["event"]["id"], int(out["deliveryCount"])
            held = await held_deliveries(http, args.api_key, event_id) if count else 0
            print(trigger_line(args.event, event_id, count, held))
            return 0
        try:
            method, path = failure_request(args.failure, args.product)
        except ValueError as exc:
            print(f"svc trigger: {exc}", file=sys.stderr)
            return 2
        headers = _headers(args.api_key, **{TRIGGER_HEADER: args.failure})
        if method == "POST":
            headers.update(idem)
            headers["X-Partner-Customer-Ref"] = "svc-cli-traveller"
            resp = await http.post(path, headers=headers, json={})
        else:
            resp = await http.get(path, headers=headers)
        print(f"{method} {path} with {TRIGGER_HEADER}: {args.failure} -> HTTP {resp.status_code}")
        print(resp.text)
        return 0 if resp.status_code == EXPECTED_STATUS[args.failure] else 1


def _endpoints(n: int, kind: str = "") -> str:
    noun = f"{kind} endpoint" if kind else "endpoint"
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def trigger_line(kind: str, event_id: str, count: int, held: int | None) -> str:
    """What ``svc trigger <kind>`` prints. ``count`` is the API's ``deliveryCount``: one delivery per
    subscribed endpoint whose content filter (if any) the event matches, disabled ones included (their
    delivery is held until the endpoint is enabled, so nothing is lost), hence ``held``, read back from
    the deliveries; None when they could not be read (a key without webhooks:read), and then the line says
    what the count includes instead of guessing."""
    if count == 0:
        return (
            f"Triggered {kind}: {event_id} (no endpoint subscribed, or none whose filter it matches; "
            "on the stream)"
        )
    if held is None:
        return (
            f"Triggered {kind}: {event_id} ({_endpoints(count)} subscribed, disabled ones included, "
            "whose delivery is held; on the stream)"
        )
    sent = count - held
    parts = [f"delivering to {_endpoints(sent)}"]
    if held:
        parts.append(f"held for {_endpoints(held, 'disabled')} until enabled")
    return f"Triggered {kind}: {event_id} ({'; '.join(parts)}; on the stream)"


async def held_deliveries(http: httpx.AsyncClient, api_key: str, event_id: str) -> int | None:
    """How many of the event's deliveries are held (their endpoint disabled), or None when the key may
    not read deliveries."""
    params = {"event": event_id, "status": "held", "limit": "100"}
    held = 0
    while True:
        resp = await http.get("/v1/webhooks/deliveries", headers=_headers(api_key), params=params)
        if resp.status_code != 200:
            return None
        page = resp.json()
        held += len(page["data"])
        if not page.get("nextPageToken"):
            return held
        params["page_token"] = page["nextPageToken"]


async def cmd_clock(args: argparse.Namespace) -> int:
    import uuid

    import httpx

    headers = _headers(args.api_key, **{"Idempotency-Key": f"svc-{uuid.uuid4()}"})
    async with httpx.AsyncClient(base_url=args.base_url, timeout=30) as http:
        resp = await http.post("/v1/sandbox/clock/advance", headers=headers, json={"by": args.by})
    if resp.status_code != 200:
        print(f"svc clock advance: HTTP {resp.status_code} {_describe_error(resp)}", file=sys.stderr)
        return 1
    out = resp.json()
    due = out["deliveriesDue"]
    noun = "delivery" if due == 1 else "deliveries"
    print(f"Advanced the sandbox clock by {out['advancedBy']}: {due} {noun} due now")
    return 0


async def cmd_webhooks(args: argparse.Namespace) -> int:
    return await webhooks.run(args, _headers(args.api_key))


async def cmd_poll(args: argparse.Namespace) -> int:
    return await poll.run(args, _headers(args.api_key))


async def cmd_certify(args: argparse.Namespace) -> int:
    return await certify.run_online(args, _headers(args.api_key))


def verify_headers(given: list[str]) -> dict[str, str]:
    """``--header`` values as a header mapping: ``Name: value``, or a bare ``t=...,v1=...`` (the
    X-Service-Signature value, as it was before names were accepted)."""
    headers: dict[str, str] = {}
    for text in given:
        name, sep, value = text.strip().partition(":")
        if sep and name.strip() and "=" not in name:
            headers[name.strip()] = value.strip()
        else:
            headers[SIGNATURE_HEADER] = text.strip()
    return headers


def cmd_verify(args: argparse.Namespace) -> int:
    body = sys.stdin.buffer.read()
    try:
        signed = verify_delivery(
            body, verify_headers(args.header), args.secret, time.time(), tolerance=args.tolerance
        ).timestamp
    except (WebhookVerificationError, ValueError) as exc:
        print(f"signature invalid: {exc}")
        return 1
    print(f"signature valid: signed at {signed} ({int(time.time()) - signed} s ago)")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "verify":
        return cmd_verify(args)
    if certify.offline(args):
        return certify.run(args)
    if not args.api_key:
        print("svc: no API key: pass --api-key or set SVC_API_KEY", file=sys.stderr)
        return 2
    import asyncio
    import contextlib

    import httpx

    handler = {
        "listen": cmd_listen,
        "trigger": cmd_trigger,
        "clock": cmd_clock,
        "webhooks": cmd_webhooks,
        "poll": cmd_poll,
        "certify": cmd_certify,
    }[args.command]
    with contextlib.suppress(KeyboardInterrupt):
        try:
            return asyncio.run(handler(args))
        except httpx.HTTPError as exc:
            print(f"svc: cannot reach {args.base_url}: {type(exc).__name__}", file=sys.stderr)
            return 1
    return 130


if __name__ == "__main__":
    sys.exit(main())
