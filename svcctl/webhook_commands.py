"""``svcctl webhooks ...``: every webhookd admin operation over gRPC (travel.webhooks.v1).

Each command prints the answer as JSON on stdout (``stream`` prints one JSON line per event).
Every command names the account (``--account``) and the environment (``--environment live|sandbox``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

from google.protobuf import field_mask_pb2, struct_pb2, timestamp_pb2
from google.protobuf.message import Message

from svcctl import destination_flags
from svcctl.client import count, duration, hooks_client, print_message
from svckit.clients import HooksClient
from svckit.prototables import DELIVERY_ORDER, DELIVERY_STATUS, PAYLOAD_MODE, SIGNATURE_SCHEME, EnumTable
from svckit.signing import SignatureScheme
from svckit.webhook_status import DeliveryOrder, PayloadMode
from travel.webhooks.v1 import webhooks_pb2 as pb

ENVIRONMENTS = {
    "live": pb.ENVIRONMENT_LIVE,
    "sandbox": pb.ENVIRONMENT_SANDBOX,
    "test": pb.ENVIRONMENT_SANDBOX,
}
DELIVERY_STATUSES: dict[str, pb.DeliveryStatus.ValueType] = {
    name: pb.DeliveryStatus.ValueType(value) for value, name in DELIVERY_STATUS.names().items()
}
OUTCOMES = {
    "succeeded": pb.ATTEMPT_OUTCOME_SUCCEEDED,
    "http_error": pb.ATTEMPT_OUTCOME_HTTP_ERROR,
    "timeout": pb.ATTEMPT_OUTCOME_TIMEOUT,
    "network_error": pb.ATTEMPT_OUTCOME_NETWORK_ERROR,
}
SCHEMES = tuple(s.value for s in SignatureScheme)
ORDERINGS = tuple(o.value for o in DeliveryOrder)
PAYLOADS = tuple(p.value for p in PayloadMode)
FILTER_HELP = (
    'content filter as JSON, e.g. \'{"data": {"product": "hotels"}}\': only matching events are delivered'
)
Handler = Callable[[HooksClient, argparse.Namespace], Awaitable[Message | None]]


def _time(text: str) -> timestamp_pb2.Timestamp:
    """RFC 3339 (``2026-01-02T03:04:05Z``) or a relative age back from now (``2h``, ``7d``)."""
    out = timestamp_pb2.Timestamp()
    m = re.fullmatch(r"(\d+)([smhd])", text.strip())
    if m:
        seconds = int(m.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]
        out.FromDatetime(dt.datetime.now(dt.UTC) - dt.timedelta(seconds=seconds))
        return out
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a time: {text!r} (RFC 3339, or an age like 2h or 7d)"
        ) from None
    out.FromDatetime(when if when.tzinfo else when.replace(tzinfo=dt.UTC))
    return out


def _json_object(text: str) -> struct_pb2.Struct:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    out = struct_pb2.Struct()
    out.update(value)
    return out


def _scope(a: argparse.Namespace) -> dict[str, Any]:
    return {"account_id": a.account, "environment": ENVIRONMENTS[a.environment]}


def _run(handler: Handler) -> Callable[[argparse.Namespace], Awaitable[int]]:
    async def run(args: argparse.Namespace) -> int:
        async with hooks_client(args) as hooks:
            answer = await handler(hooks, args)
            if answer is not None:
                print_message(answer)
        return 0

    return run


def _cmd(sub: Any, name: str, help: str, handler: Handler) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(name, help=help, description=help)
    parser.add_argument("--account", required=True, help="acct_... the resource belongs to")
    parser.add_argument("--environment", "--env", choices=sorted(ENVIRONMENTS), required=True)
    parser.set_defaults(handler=_run(handler))
    return parser


async def _register(hooks: HooksClient, a: argparse.Namespace) -> Message:
    return await hooks.register_endpoint(
        pb.RegisterEndpointRequest(
            **_scope(a),
            url=a.url or "",
            events=a.event or [],
            description=a.description,
            signature_scheme=_number(SIGNATURE_SCHEME, a.signature_scheme),
            ordering=_number(DELIVERY_ORDER, a.ordering),
            filter_json=a.filter or "",
            payload=_number(PAYLOAD_MODE, a.payload),
            **destination_flags.request_fields(a),
        )
    )


def _number(table: EnumTable[Any], word: str | None) -> Any:
    """A flag's word (``--signature-scheme``, ``--ordering``) as its proto number; 0, the enum's
    UNSPECIFIED (webhookd's default), when not given."""
    return table.pb(word) if word else 0


async def _get(hooks: HooksClient, a: argparse.Namespace) -> Message:
    return await hooks.get_endpoint(pb.GetEndpointRequest(**_scope(a), endpoint_id=a.endpoint_id))


async def _list(hooks: HooksClient, a: argparse.Namespace) -> Message:
    return await hooks.list_endpoints(
        pb.ListEndpointsRequest(**_scope(a), page_size=a.page_size, page_token=a.page_token)
    )


async def _update(hooks: HooksClient, a: argparse.Namespace) -> Message:
    given = (
        ("url", a.url),
        ("events", a.event),
        ("description", a.description),
        ("signature_scheme", a.signature_scheme),
        ("ordering", a.ordering),
        ("filter_json", a.filter),
        ("payload", a.payload),
    )
    paths = [p for p, v in given if v is not None] + destination_flags.update_paths(a)
    if not paths:
        raise SystemExit(
            "update: give at least one of --url, --event, --description, --signature-scheme, --ordering,"
            " --filter, --payload, --type, --amqp-*, --nats-*"
        )
    return await hooks.update_endpoint(
        pb.UpdateEndpointRequest(
            **_scope(a),
            endpoint_id=a.endpoint_id,
            update_mask=field_mask_pb2.FieldMask(paths=paths),
            url=a.url or "",
            events=a.event or [],
            description=a.description or "",
            signature_scheme=_number(SIGNATURE_SCHEME, a.signature_scheme),
            ordering=_number(DELIVERY_ORDER, a.ordering),
            filter_json=a.filter or "",
            payload=_number(PAYLOAD_MODE, a.payload),
            **destination_flags.request_fields(a),
        )
    )


def _read(path: str, what: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError as exc:
        raise SystemExit(f"receiver-auth: cannot read the {what} {path!r} ({exc.strerror})") from None


def _receiver_auth_of(a: argparse.Namespace) -> pb.ReceiverAuth | None:
    """The flags of ``receiver-auth`` as webhookd's ReceiverAuth (docs/webhooks.md "Receivers that
    authenticate us"); secrets come from files, never the command line."""
    if a.none:
        return None
    out = pb.ReceiverAuth()
    for header in a.header or []:
        name, sep, value = header.partition(":")
        if not sep:
            raise SystemExit(f"receiver-auth: --header {header!r} is not NAME:VALUE")
        out.headers[name.strip()] = value.strip()
    if a.client_cert_platform:
        out.client_certificate.issued_by_platform = True
    elif a.client_cert_sha256:
        out.client_certificate.sha256_fingerprint = a.client_cert_sha256
    elif a.client_cert or a.client_key:
        if not (a.client_cert and a.client_key):
            raise SystemExit("receiver-auth: --client-cert and --client-key go together")
        out.client_certificate.certificate_pem = _read(a.client_cert, "certificate")
        out.client_certificate.private_key_pem = _read(a.client_key, "private key")
    if a.oauth2_token_url:
        secret = (
            _read(a.oauth2_client_secret_file, "client secret").strip() if a.oauth2_client_secret_file else ""
        )
        out.oauth2.CopyFrom(
            pb.OAuth2ClientCredentials(
                token_url=a.oauth2_token_url,
                client_id=a.oauth2_client_id or "",
                client_secret=secret,
                scope=a.oauth2_scope or "",
                audience=a.oauth2_audience or "",
            )
        )
    return out


async def _receiver_auth(hooks: HooksClient, a: argparse.Namespace) -> Message:
    return await hooks.update_endpoint(
        pb.UpdateEndpointRequest(
            **_scope(a),
            endpoint_id=a.endpoint_id,
            update_mask=field_mask_pb2.FieldMask(paths=["receiver_auth"]),
            receiver_auth=_receiver_auth_of(a),
        )
    )


async def _signing_keys(hooks: HooksClient, a: argparse.Namespace) -> Message:
    return await hooks.list_signing_keys(pb.ListSigningKeysRequest(**_scope(a), endpoint_id=a.endpoint or ""))


async def _delete(hooks: HooksClient, a: argparse.Namespace) -> Message:
    return await hooks.delete_endpoint(pb.DeleteEndpointRequest(**_scope(a), endpoint_id=a.endpoint_id))


async def _enable(hooks: HooksClient, a: argparse.Namespace) -> Message:
    return await hooks.enable_endpoint(pb.EnableEndpointRequest(**_scope(a), endpoint_id=a.endpoint_id))


async def _rotate(hooks: HooksClient, a: argparse.Namespace) -> Message:
    request = pb.RotateSigningSecretRequest(**_scope(a), endpoint_id=a.endpoint_id)
    if a.overlap is not None:
        request.overlap.CopyFrom(a.overlap)
    return await hooks.rotate_signing_secret(request)


async def _send_test(hooks: HooksClient, a: argparse.Namespace) -> Message:
    return await hooks.send_test_event(pb.SendTestEventRequest(**_scope(a), endpoint_id=a.endpoint_id))


async def _recover(hooks: HooksClient, a: argparse.Namespace) -> None:
    """Prints the count always (0 too); with --dry-run it is what would be queued, and nothing changes."""
    request = pb.RecoverEndpointRequest(**_scope(a), endpoint_id=a.endpoint_id, dry_run=a.dry_run)
    if a.since is not None:
        request.since.CopyFrom(a.since)
    answer = await hooks.recover_endpoint(request)
    out: dict[str, Any] = {"recovered_count": answer.recovered_count}
    if a.dry_run:
        out["dry_run"] = True
    print(json.dumps(out, indent=2), flush=True)
    return None


async def _publish(hooks: HooksClient, a: argparse.Namespace) -> Message:
    request = pb.PublishEventRequest(
        **_scope(a), type=a.type, state=a.state, idempotency_key=a.idempotency_key
    )
    if a.data is not None:
        request.data.CopyFrom(a.data)
    return await hooks.publish_event(request)


def _window(
    request: pb.ListDeliveriesRequest | pb.ListAttemptsRequest | pb.ListEventsRequest, a: argparse.Namespace
) -> None:
    """--since / --until onto a list request's time window."""
    if a.since is not None:
        request.since.CopyFrom(a.since)
    if a.until is not None:
        request.until.CopyFrom(a.until)


async def _deliveries(hooks: HooksClient, a: argparse.Namespace) -> Message:
    request = pb.ListDeliveriesRequest(
        **_scope(a),
        endpoint_id=a.endpoint or "",
        event_id=a.event_id or "",
        event_type=a.event_type or "",
        status=DELIVERY_STATUSES[a.status] if a.status else pb.DELIVERY_STATUS_UNSPECIFIED,
        page_size=a.page_size,
        page_token=a.page_token,
    )
    _window(request, a)
    return await hooks.list_deliveries(request)


async def _attempts(hooks: HooksClient, a: argparse.Namespace) -> Message:
    request = pb.ListAttemptsRequest(
        **_scope(a),
        endpoint_id=a.endpoint or "",
        event_id=a.event_id or "",
        delivery_id=a.delivery or "",
        outcome=OUTCOMES[a.outcome] if a.outcome else pb.ATTEMPT_OUTCOME_UNSPECIFIED,
        page_size=a.page_size,
        page_token=a.page_token,
    )
    _window(request, a)
    return await hooks.list_attempts(request)


async def _resend(hooks: HooksClient, a: argparse.Namespace) -> Message:
    return await hooks.resend_attempt(pb.ResendAttemptRequest(**_scope(a), attempt_id=a.attempt_id))


async def _events(hooks: HooksClient, a: argparse.Namespace) -> Message:
    request = pb.ListEventsRequest(
        **_scope(a),
        types=a.type or [],
        page_size=a.limit,
        page_token=a.page_token,
        undelivered_to=a.undelivered_to or "",
    )
    _window(request, a)
    return await hooks.list_events(request)


async def _event(hooks: HooksClient, a: argparse.Namespace) -> Message:
    return await hooks.get_event(pb.GetEventRequest(**_scope(a), event_id=a.event_id))


async def _stream(hooks: HooksClient, a: argparse.Namespace) -> None:
    call = hooks.stream_events(
        pb.StreamEventsRequest(**_scope(a), types=a.type or [], since_event_id=a.since_event)
    )
    count = 0
    async for message in call:
        print_message(message.event, indent=None)
        count += 1
        if a.limit and count >= a.limit:
            call.cancel()
            break
    return None


def _paged(p: argparse.ArgumentParser) -> None:
    p.add_argument("--page-size", type=count, default=0)
    p.add_argument("--page-token", default="")


def _timed(p: argparse.ArgumentParser) -> None:
    p.add_argument("--since", type=_time, help="RFC 3339 time or an age such as 2h, 7d")
    p.add_argument("--until", type=_time, help="RFC 3339 time or an age such as 2h, 7d")


def register(groups: Any) -> None:
    sub = groups.add_parser(
        "webhooks", help="webhook endpoints, events, deliveries and attempts"
    ).add_subparsers(dest="command", required=True)
    p = _cmd(sub, "register", "register an endpoint; its signing secret is printed this once", _register)
    p.add_argument("--url", help="https:// URL of the partner's receiver (type http, the default)")
    p.add_argument("--event", action="append", help="event kind to receive, e.g. booking.confirmed; repeat")
    p.add_argument("--description", default="")
    p.add_argument(
        "--signature-scheme", choices=SCHEMES, help="signature headers of its deliveries (default: stripe)"
    )
    p.add_argument(
        "--ordering", choices=ORDERINGS, help="perResource: one in flight per booking (default: none)"
    )
    p.add_argument("--filter", help=FILTER_HELP)
    p.add_argument("--payload", choices=PAYLOADS, help="thin: ids and references only (default: full)")
    destination_flags.add_flags(p)
    p = _cmd(sub, "get", "show an endpoint", _get)
    p.add_argument("endpoint_id")
    p = _cmd(sub, "list", "list endpoints", _list)
    _paged(p)
    p = _cmd(
        sub,
        "update",
        "change an endpoint's url, events, description, signature scheme, ordering, filter or payload",
        _update,
    )
    p.add_argument("endpoint_id")
    p.add_argument("--url")
    p.add_argument("--event", action="append", help="replaces the whole list; repeat")
    p.add_argument("--description")
    p.add_argument("--signature-scheme", choices=SCHEMES, help="signature headers of its deliveries")
    p.add_argument("--ordering", choices=ORDERINGS, help="none, or perResource: one in flight per booking")
    p.add_argument("--filter", help=FILTER_HELP + "; '' removes it")
    p.add_argument("--payload", choices=PAYLOADS, help="full, or thin: ids and references only")
    destination_flags.add_flags(p)
    p = _cmd(
        sub,
        "receiver-auth",
        "set how the endpoint's receiver authenticates us (replaces the whole; --none removes it)",
        _receiver_auth,
    )
    p.add_argument("endpoint_id")
    p.add_argument("--none", action="store_true", help="remove every part")
    p.add_argument(
        "--header", action="append", help="NAME:VALUE sent with every delivery (not secret); repeat"
    )
    p.add_argument(
        "--client-cert-platform", action="store_true", help="a client certificate issued by the platform's CA"
    )
    p.add_argument("--client-cert-sha256", help="keep the current client certificate (its SHA-256)")
    p.add_argument("--client-cert", help="file: the client certificate to upload (PEM, leaf first)")
    p.add_argument("--client-key", help="file: its private key (PEM, not encrypted)")
    p.add_argument("--oauth2-token-url", help="https:// token endpoint for OAuth2 client credentials")
    p.add_argument("--oauth2-client-id")
    p.add_argument("--oauth2-client-secret-file", help="file holding the client secret (omitted: kept)")
    p.add_argument("--oauth2-scope")
    p.add_argument("--oauth2-audience")
    p = _cmd(
        sub, "signing-keys", "list the ed25519 public keys of Standard Webhooks v1a signatures", _signing_keys
    )
    p.add_argument("--endpoint", help="only this endpoint's keys (we_...)")
    p = _cmd(sub, "delete", "delete an endpoint", _delete)
    p.add_argument("endpoint_id")
    p = _cmd(sub, "enable", "re-enable a disabled endpoint (then recover what it missed)", _enable)
    p.add_argument("endpoint_id")
    p = _cmd(
        sub, "rotate-secret", "issue a new signing secret; the old one stays valid for --overlap", _rotate
    )
    p.add_argument("endpoint_id")
    p.add_argument("--overlap", type=duration, help="0s to 7d (default 24h)")
    p = _cmd(sub, "send-test", "send a sample delivery to the endpoint", _send_test)
    p.add_argument("endpoint_id")
    p = _cmd(sub, "recover", "re-send what the endpoint missed (failed or held) since a time", _recover)
    p.add_argument("endpoint_id")
    p.add_argument("--since", type=_time, help="RFC 3339 time or an age such as 2h, 7d (default: all)")
    p.add_argument("--dry-run", action="store_true", help="print how many would be queued; change nothing")
    p = _cmd(
        sub,
        "publish",
        "publish a sandbox event (operators may not publish live ones: docs/events.md, published by)",
        _publish,
    )
    p.add_argument("--type", required=True, help="event kind, e.g. booking.confirmed")
    p.add_argument("--state", default="", help="one of the kind's states (default: its first)")
    p.add_argument(
        "--data", type=_json_object, help="JSON object, valid by the kind's schema (docs/events.md)"
    )
    p.add_argument("--idempotency-key", default="")
    p = _cmd(sub, "deliveries", "list deliveries", _deliveries)
    p.add_argument("--endpoint")
    p.add_argument("--event-id")
    p.add_argument("--event-type", help="only deliveries of this event kind, e.g. booking.confirmed")
    p.add_argument("--status", choices=sorted(DELIVERY_STATUSES))
    _timed(p)
    _paged(p)
    p = _cmd(sub, "attempts", "list delivery attempts (kept 30 days)", _attempts)
    p.add_argument("--endpoint")
    p.add_argument("--event-id")
    p.add_argument("--delivery")
    p.add_argument("--outcome", choices=sorted(OUTCOMES))
    _timed(p)
    _paged(p)
    p = _cmd(sub, "resend", "send an attempt's delivery again now, by hand", _resend)
    p.add_argument("attempt_id")
    events = sub.add_parser(
        "events", help="read back the events of the last 30 days", description="read back events"
    ).add_subparsers(dest="events_command", required=True)
    p = _cmd(events, "list", "list the events of the last 30 days, newest first", _events)
    p.add_argument("--type", action="append", help="only this kind, e.g. booking.confirmed; repeat")
    p.add_argument(
        "--undelivered-to",
        metavar="ENDPOINT",
        help="only events held or failed for this we_... (reconciliation)",
    )
    _timed(p)
    p.add_argument("--limit", type=count, default=0, help="events per page (default: the server's)")
    p.add_argument("--page-token", default="", help="next_page_token of the previous page")
    p = _cmd(events, "get", "show one event of the last 30 days", _event)
    p.add_argument("event_id", help="evt_...")
    p = _cmd(sub, "stream", "print events as they are published (JSON lines)", _stream)
    p.add_argument("--type", action="append", help="only this kind; repeat")
    p.add_argument("--since-event", default="", help="replay events after this evt_... first")
    p.add_argument("--limit", type=count, default=0, help="stop after this many events")
