"""Records <-> protobuf messages, and request-field validation shared by the servicer."""

from __future__ import annotations

import datetime as dt
from typing import Any

from google.protobuf import duration_pb2, struct_pb2, timestamp_pb2

from svckit import pages
from svckit.filtercheck import FilterError, canonical, parse_filter
from svckit.freetext import content_problem, free_text_problem
from svckit.protos import timestamp as ts
from svckit.prototables import (
    ATTEMPT_OUTCOME,
    DELIVERY_ORDER,
    DELIVERY_STATUS,
    DESTINATION_TYPE,
    ENDPOINT_STATUS,
    HOOKS_ENVIRONMENT,
    PAYLOAD_MODE,
    SIGNATURE_SCHEME,
)
from svckit.signing import SignatureScheme
from svckit.webhook_status import DeliveryOrder, DestinationType, PayloadMode
from travel.webhooks.v1 import webhooks_pb2 as pb
from webhookd._destination_settings import AmqpSettings, NatsSettings, server_urls
from webhookd._errors import InvalidRequest
from webhookd._receiver_auth_pb import receiver_auth_pb
from webhookd._repository import (
    AttemptRecord,
    DeliveryRecord,
    EndpointRecord,
    EventRecord,
)
from webhookd._times import at_us, us

# The proto enums <-> the stored words: svckit.prototables' tables (HOOKS_ENVIRONMENT, DELIVERY_STATUS,
# ENDPOINT_STATUS, ATTEMPT_OUTCOME), derived from the names.

MAX_ID = 64
MAX_DESCRIPTION = 1024
DEFAULT_PAGE = 50
MAX_PAGE = 500


def environment(value: int) -> str:
    try:
        return HOOKS_ENVIRONMENT.word(value).value
    except ValueError:
        raise InvalidRequest("environment: must be ENVIRONMENT_LIVE or ENVIRONMENT_SANDBOX") from None


def identifier(value: str, field: str, prefix: str | None = None) -> str:
    if not value:
        raise InvalidRequest(f"{field}: is required")
    if len(value) > MAX_ID or not value.isprintable() or " " in value:
        raise InvalidRequest(f"{field}: not a valid id")
    if prefix and not value.startswith(prefix + "_"):
        raise InvalidRequest(f"{field}: must start with {prefix}_")
    return value


def scope(request: Any) -> tuple[str, str]:
    return identifier(request.account_id, "account_id"), environment(request.environment)


def duration_between(request: Any, field: str, low: dt.timedelta, high: dt.timedelta) -> dt.timedelta:
    """The required ``google.protobuf.Duration`` field ``field`` of ``request``, from ``low`` to ``high``."""
    within = f"between {_spoken(low)} and {_spoken(high)}"
    if not request.HasField(field):
        raise InvalidRequest(f"{field}: is required, {within}")
    value: dt.timedelta = getattr(request, field).ToTimedelta()
    if not low <= value <= high:
        raise InvalidRequest(f"{field}: must be {within}")
    return value


def _spoken(value: dt.timedelta) -> str:
    """``1 second``, ``7 days``: a bound as an error message says it."""
    for unit, seconds in (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1)):
        n, rest = divmod(int(value.total_seconds()), seconds)
        if n and not rest:
            return f"{n} {unit}" + ("s" if n > 1 else "")
    return f"{value.total_seconds()} seconds"


def url(value: str) -> str:
    """An endpoint URL is listed and logged: a key or secret pasted into it (a query parameter) is refused,
    and so are control characters (a NUL would reach the resolver and the database)."""
    problem = content_problem(value)
    if problem:
        raise InvalidRequest(f"url: {problem}")
    return value


def description(value: str) -> str:
    problem = free_text_problem(value, max_len=MAX_DESCRIPTION)
    if problem:
        raise InvalidRequest(f"description: {problem}")
    return value


def signature_scheme(value: int) -> SignatureScheme:
    """UNSPECIFIED is the default, STRIPE (the spec's own header)."""
    if value == pb.SIGNATURE_SCHEME_UNSPECIFIED:
        return SignatureScheme.STRIPE
    try:
        return SIGNATURE_SCHEME.word(value)
    except ValueError:
        raise InvalidRequest(f"signature_scheme: {value} is not a known scheme") from None


def ordering(value: int) -> DeliveryOrder:
    """UNSPECIFIED is the default, UNORDERED (spec section 6)."""
    if value == pb.DELIVERY_ORDER_UNSPECIFIED:
        return DeliveryOrder.UNORDERED
    try:
        return DELIVERY_ORDER.word(value)
    except ValueError:
        raise InvalidRequest(f"ordering: {value} is not a known delivery order") from None


def update_paths(paths: Any, updatable: tuple[str, ...]) -> list[str]:
    """An update mask's paths, each one of ``updatable`` and at least one."""
    out = list(paths)
    if not out:
        raise InvalidRequest(f"update_mask: name at least one of {', '.join(updatable)}")
    for path in out:
        if path not in updatable:
            raise InvalidRequest(
                f"update_mask: {path!r} cannot be updated; updatable: {', '.join(updatable)}"
            )
    return out


def payload(value: int) -> PayloadMode:
    """UNSPECIFIED is the default, FULL."""
    if value == pb.PAYLOAD_MODE_UNSPECIFIED:
        return PayloadMode.FULL
    try:
        return PAYLOAD_MODE.word(value)
    except ValueError:
        raise InvalidRequest(f"payload: {value} is not a known payload mode") from None


def content_filter(text: str) -> Any:
    """A filter sent as JSON text, checked (svckit.filtercheck); None for "" (no filter)."""
    try:
        return parse_filter(text)
    except FilterError as exc:
        raise InvalidRequest(str(exc), metadata={"field": exc.problem.path}) from None


def destination_type(value: int) -> DestinationType:
    """UNSPECIFIED is HTTP (every endpoint made before destination types)."""
    if value == pb.DESTINATION_TYPE_UNSPECIFIED:
        return DestinationType.HTTP
    try:
        return DESTINATION_TYPE.word(value)
    except ValueError:
        raise InvalidRequest(f"type: {value} is not a known destination type") from None


def page_size(value: int) -> int:
    if value < 0:
        raise InvalidRequest("page_size: must not be negative")
    return min(value or DEFAULT_PAGE, MAX_PAGE)


def page_token(created: dt.datetime, row_id: str) -> str:
    return pages.page_token(us(created), row_id)


def parse_page_token(token: str) -> tuple[dt.datetime, str] | None:
    if not token:
        return None
    try:
        micros, row_id = pages.page_parts(token, 2)
        return at_us(int(micros)), row_id
    except (ValueError, OverflowError):  # BadPageToken included
        raise InvalidRequest(pages.BAD_PAGE_TOKEN) from None


def time_or_none(msg: Any, field: str) -> dt.datetime | None:
    if not msg.HasField(field):
        return None
    value: timestamp_pb2.Timestamp = getattr(msg, field)
    return value.ToDatetime(tzinfo=dt.UTC)


def endpoint_pb(e: EndpointRecord, now: dt.datetime) -> pb.Endpoint:
    return pb.Endpoint(
        id=e.id,
        account_id=e.account_id,
        environment=HOOKS_ENVIRONMENT.pb(e.environment),
        url=e.url,
        events=e.events,
        description=e.description,
        status=ENDPOINT_STATUS.pb(e.status),
        disabled_reason=e.disabled_reason,
        created_at=ts(e.created_at),
        updated_at=ts(e.updated_at),
        previous_secret_expires_at=ts(e.previous_secret_expires_at(now)),
        signature_scheme=SIGNATURE_SCHEME.pb(e.signature_scheme),
        ordering=DELIVERY_ORDER.pb(e.ordering),
        filter_json="" if e.filter is None else canonical(e.filter),
        payload=PAYLOAD_MODE.pb(e.payload),
        filter_updated_at=ts(e.filter_updated_at or e.created_at),
        type=DESTINATION_TYPE.pb(e.destination_type),
        **_destination_pb(e),
        receiver_auth=receiver_auth_pb(e.receiver_auth),
    )


def _destination_pb(e: EndpointRecord) -> dict[str, Any]:
    """The destination's settings as shown: never a password or token, only whether one is stored."""
    d = e.destination
    if isinstance(d, AmqpSettings):
        return {
            "amqp": pb.AmqpDestination(
                url=d.url, exchange=d.exchange, routing_key=d.routing_key, password_set=bool(d.password)
            )
        }
    if isinstance(d, NatsSettings):
        return {
            "nats": pb.NatsDestination(
                servers=server_urls(d),
                subject=d.subject,
                user=d.user,
                credentials_set=bool(d.password or d.token),
            )
        }
    return {}


def event_pb(e: EventRecord) -> pb.Event:
    data = struct_pb2.Struct()
    data.update(e.data)
    return pb.Event(
        id=e.id,
        type=e.type,
        account_id=e.account_id,
        environment=HOOKS_ENVIRONMENT.pb(e.environment),
        state=e.state,
        data=data,
        created_at=ts(e.created_at),
        envelope_json=e.envelope.decode(),
    )


def delivery_pb(d: DeliveryRecord) -> pb.Delivery:
    return pb.Delivery(
        id=d.id,
        endpoint_id=d.endpoint_id,
        event_id=d.event_id,
        event_type=d.event_type,
        status=DELIVERY_STATUS.pb(d.status),
        attempt_count=d.attempt_count,
        next_attempt_at=ts(d.next_attempt_at),
        created_at=ts(d.created_at),
        updated_at=ts(d.updated_at),
    )


def outcome_pb(word: str) -> Any:
    """An attempt's stored outcome as the proto's, UNSPECIFIED for a word this release does not know."""
    try:
        return ATTEMPT_OUTCOME.pb(word)
    except ValueError:
        return pb.ATTEMPT_OUTCOME_UNSPECIFIED


def attempt_pb(a: AttemptRecord) -> pb.Attempt:
    latency = duration_pb2.Duration()
    latency.FromMicroseconds(int(a.latency_ms * 1000))
    return pb.Attempt(
        id=a.id,
        delivery_id=a.delivery_id,
        endpoint_id=a.endpoint_id,
        event_id=a.event_id,
        attempt_number=a.attempt_number,
        outcome=outcome_pb(a.outcome),
        response_status=a.response_status,
        response_body=a.response_body,
        request_headers=a.request_headers,
        response_headers=a.response_headers,
        latency=latency,
        error=a.error,
        attempted_at=ts(a.attempted_at),
        manual=a.manual,
    )
