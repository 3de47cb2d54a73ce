"""Protobuf messages -> the JSON shapes of the HTTP API (camelCase, RFC 3339 UTC timestamps)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from google.protobuf import timestamp_pb2

from edge.destinations import shown
from edge.exceptions import EdgeError
from edge.receiver_auth import receiver_auth
from svckit.filtercheck import canonical, filter_problem
from svckit.prototables import (
    ATTEMPT_OUTCOME,
    DELIVERY_ORDER,
    DELIVERY_STATUS,
    ENDPOINT_STATUS,
    PAYLOAD_MODE,
    SIGNATURE_SCHEME,
)
from svckit.signing import SignatureScheme
from svckit.webhook_status import DeliveryOrder, DeliveryStatus, EndpointStatus, PayloadMode
from travel.webhooks.v1 import webhooks_pb2


def iso(value: dt.datetime | None) -> str | None:
    """A resource's time as the REST API answers it: RFC 3339, UTC, ``Z``, as many fractional digits as
    it has (microseconds at most; docs/architecture.md "Time on the wire")."""
    return value.astimezone(dt.UTC).isoformat().replace("+00:00", "Z") if value else None


def rfc3339(ts: Any) -> str | None:
    """``iso`` of a proto Timestamp; None for an unset one."""
    if ts is None or (ts.seconds == 0 and ts.nanos == 0):
        return None
    return iso(ts.ToDatetime(tzinfo=dt.UTC))


def endpoint(ep: webhooks_pb2.Endpoint) -> dict[str, Any]:
    return {
        "object": "webhook_endpoint",
        "id": ep.id,
        "url": ep.url,
        "events": list(ep.events),
        "description": ep.description,
        "status": ENDPOINT_STATUS.get(ep.status, EndpointStatus.ENABLED.value),
        "disabledReason": ep.disabled_reason or None,
        "livemode": ep.environment == webhooks_pb2.ENVIRONMENT_LIVE,
        "created": rfc3339(ep.created_at),
        "updated": rfc3339(ep.updated_at),
        "previousSecretExpires": rfc3339(ep.previous_secret_expires_at),
        "signatureScheme": SIGNATURE_SCHEME.get(ep.signature_scheme, SignatureScheme.STRIPE.value),
        "ordering": DELIVERY_ORDER.get(ep.ordering, DeliveryOrder.UNORDERED.value),
        "filter": json.loads(ep.filter_json) if ep.filter_json else None,
        "payload": PAYLOAD_MODE.get(ep.payload, PayloadMode.FULL.value),
        "receiverAuth": receiver_auth(ep),
    } | shown(ep)


def signing_key(key: webhooks_pb2.SigningKey) -> dict[str, Any]:
    return {
        "object": "webhook_signing_key",
        "endpoint": key.endpoint_id,
        "algorithm": "ed25519",
        "publicKey": key.public_key,
        "expires": rfc3339(key.expires_at),
    }


def event(ev: webhooks_pb2.Event) -> dict[str, Any]:
    if ev.envelope_json:
        try:
            envelope = json.loads(ev.envelope_json)
            if isinstance(envelope, dict):
                return envelope
        except ValueError:
            pass
    from google.protobuf import json_format

    return {
        "id": ev.id,
        "type": ev.type,
        "created": rfc3339(ev.created_at),
        "livemode": ev.environment == webhooks_pb2.ENVIRONMENT_LIVE,
        "account": ev.account_id,
        "state": ev.state,
        "data": json_format.MessageToDict(ev.data) if ev.HasField("data") else {},
    }


def delivery(d: webhooks_pb2.Delivery) -> dict[str, Any]:
    return {
        "object": "webhook_delivery",
        "id": d.id,
        "endpointId": d.endpoint_id,
        "eventId": d.event_id,
        "eventType": d.event_type,
        "status": DELIVERY_STATUS.get(d.status, DeliveryStatus.PENDING.value),
        "attemptCount": d.attempt_count,
        "nextAttempt": rfc3339(d.next_attempt_at),
        "created": rfc3339(d.created_at),
        "updated": rfc3339(d.updated_at),
    }


def attempt(a: webhooks_pb2.Attempt) -> dict[str, Any]:
    return {
        "object": "webhook_attempt",
        "id": a.id,
        "deliveryId": a.delivery_id,
        "endpointId": a.endpoint_id,
        "eventId": a.event_id,
        "attemptNumber": a.attempt_number,
        "outcome": ATTEMPT_OUTCOME.get(a.outcome, "unknown"),
        "responseStatus": a.response_status or None,
        "responseBody": a.response_body,
        "requestHeaders": dict(a.request_headers),
        "responseHeaders": dict(a.response_headers),
        "latencyMs": round(a.latency.ToTimedelta().total_seconds() * 1000, 1),
        "error": a.error or None,
        "attempted": rfc3339(a.attempted_at),
        "manual": a.manual,
    }


# -- request body and query validation --------------------------------------------------------------
def only_fields(body: dict[str, Any] | None, allowed: set[str]) -> dict[str, Any]:
    body = body or {}
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise EdgeError(
            f"unknown field(s) in the request body: {', '.join(unknown)}; "
            f"allowed: {', '.join(sorted(allowed)) or 'none'}",
            type="invalid_request",
        )
    return body


def string_field(
    body: dict[str, Any], name: str, *, required: bool = False, max_len: int = 2048
) -> str | None:
    value = body.get(name)
    if value is None:
        if required:
            raise EdgeError(f"the field {name} is required", type="invalid_request")
        return None
    if not isinstance(value, str) or len(value) > max_len:
        raise EdgeError(
            f"the field {name} must be a string of at most {max_len} characters", type="invalid_request"
        )
    return value


def signature_scheme_field(body: dict[str, Any]) -> webhooks_pb2.SignatureScheme.ValueType:
    """``signatureScheme`` as its proto number; UNSPECIFIED (the default scheme) when absent."""
    value = body.get("signatureScheme")
    if value is None:
        return webhooks_pb2.SIGNATURE_SCHEME_UNSPECIFIED
    if value not in tuple(SignatureScheme):
        choices = ", ".join(s.value for s in SignatureScheme)
        raise EdgeError(f"the field signatureScheme must be one of {choices}", type="invalid_request")
    scheme: webhooks_pb2.SignatureScheme.ValueType = SIGNATURE_SCHEME.pb(value)
    return scheme


def ordering_field(body: dict[str, Any]) -> webhooks_pb2.DeliveryOrder.ValueType:
    """``ordering`` as its proto number; UNSPECIFIED (unordered, the default) when absent (null is no
    value: a 400, as the OpenAPI schema says)."""
    if "ordering" not in body:
        return webhooks_pb2.DELIVERY_ORDER_UNSPECIFIED
    value = body["ordering"]
    if value not in tuple(DeliveryOrder):
        choices = ", ".join(o.value for o in DeliveryOrder)
        raise EdgeError(f"the field ordering must be one of {choices}", type="invalid_request")
    order: webhooks_pb2.DeliveryOrder.ValueType = DELIVERY_ORDER.pb(value)
    return order


def filter_field(body: dict[str, Any]) -> str:
    """``filter`` checked (svckit.filtercheck: a 400 naming the bad operator's path) as the JSON text
    webhookd stores; "" when absent or null (no filter)."""
    value = body.get("filter")
    if value is None:
        return ""
    problem = filter_problem(value)
    if problem is not None:
        raise EdgeError(f"the field {problem}", type="invalid_request")
    return canonical(value)


def payload_field(body: dict[str, Any]) -> webhooks_pb2.PayloadMode.ValueType:
    """``payload`` as its proto number; UNSPECIFIED (full, the default) when absent."""
    if "payload" not in body:
        return webhooks_pb2.PAYLOAD_MODE_UNSPECIFIED
    value = body["payload"]
    if value not in tuple(PayloadMode):
        choices = ", ".join(p.value for p in PayloadMode)
        raise EdgeError(f"the field payload must be one of {choices}", type="invalid_request")
    mode: webhooks_pb2.PayloadMode.ValueType = PAYLOAD_MODE.pb(value)
    return mode


def string_list_field(body: dict[str, Any], name: str, *, required: bool = False) -> list[str] | None:
    value = body.get(name)
    if value is None:
        if required:
            raise EdgeError(f"the field {name} is required", type="invalid_request")
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value) or len(value) > 100:
        raise EdgeError(f"the field {name} must be a list of strings", type="invalid_request")
    return list(value)


def int_field(body: dict[str, Any], name: str, lo: int, hi: int) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():  # 60.0 is a JSON Schema integer
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise EdgeError(f"the field {name} must be an integer from {lo} to {hi}", type="invalid_request")
    return value


def query_limit(args: Any, default: int = 20) -> int:
    raw = args.get("limit")
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if not 1 <= value <= 100:
        raise EdgeError("the query parameter limit must be an integer from 1 to 100", type="invalid_request")
    return value


def query_id(args: Any, name: str, prefix: str) -> str:
    raw = args.get(name)
    if raw is None or raw == "":
        return ""
    if not raw.startswith(prefix + "_") or len(raw) > 64 or not raw.isascii() or not raw.isprintable():
        raise EdgeError(f"the query parameter {name} must be a {prefix}_ id", type="invalid_request")
    return str(raw)


def path_id(value: str, name: str, prefix: str) -> str:
    if (
        not value.startswith(prefix + "_")
        or len(value) > 64
        or not value.isascii()
        or not value.isprintable()
    ):
        raise EdgeError(f"no {name} {value!r}: ids of this kind start with {prefix}_", type="not_found")
    return value


def parse_time(value: str, name: str) -> dt.datetime:
    try:
        when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise EdgeError(f"the field {name} must be an RFC 3339 timestamp", type="invalid_request") from None
    if when.tzinfo is None:
        raise EdgeError(f"the field {name} must carry a time zone (e.g. Z)", type="invalid_request")
    return when


def timestamp(value: str, name: str) -> timestamp_pb2.Timestamp:
    """An RFC 3339 field or parameter as a protobuf Timestamp."""
    ts = timestamp_pb2.Timestamp()
    ts.FromDatetime(parse_time(value, name))
    return ts
