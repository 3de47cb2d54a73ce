"""Stored rows <-> records, each written once, in the column order ``_tables`` derives from the tables.

A row read may be a SQLAlchemy row or one of the named tuples below (a queue's plain tuples, named by the
same column lists); what is stored differs from the record only where a value is encoded: times as
microseconds (``_times.us``), header maps and event lists as JSON, signing secrets sealed.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import operator
from collections.abc import Sequence
from typing import Any

from svckit.filtercheck import canonical
from svckit.signing import SignatureScheme
from svckit.webhook_status import DeliveryOrder, DeliveryStatus, DestinationType, EndpointStatus, PayloadMode
from webhookd._destination_settings import settings_of, stored_json
from webhookd._receiver_auth import of_stored, stored
from webhookd._repository import (
    Alert,
    AttemptRecord,
    DeliveryRecord,
    EndpointRecord,
    EventRecord,
    SigningSecret,
)
from webhookd._secretbox import SecretBox
from webhookd._tables import (
    ATTEMPT_COLUMNS,
    DELIVERY_COLUMNS,
    DELIVERY_INSERT_COLUMNS,
    ENDPOINT_COLUMNS,
    PENDING_COLUMNS,
)
from webhookd._times import at_us, from_us, us

# Plain tuples of the queues' statements, named by their column lists.
DeliveryRow = collections.namedtuple("DeliveryRow", DELIVERY_COLUMNS)  # type: ignore[misc]
EndpointRow = collections.namedtuple("EndpointRow", ENDPOINT_COLUMNS)  # type: ignore[misc]

# An attempt is stored field by field under its own names: a field without its column fails at import.
if tuple(f.name for f in dataclasses.fields(AttemptRecord)) != ATTEMPT_COLUMNS:
    raise ImportError("AttemptRecord's fields and wh_attempts' columns differ")


def secrets_json(secrets: Sequence[SigningSecret]) -> str:
    return json.dumps(
        [
            {"s": s.secret, "exp": us(s.expires_at) if s.expires_at else None}
            | ({"k": s.signing_key} if s.signing_key else {})
            for s in secrets
        ]
    )


def endpoint_of(row: Any, box: SecretBox) -> EndpointRecord:
    return EndpointRecord(
        id=row.id,
        account_id=row.account_id,
        environment=row.environment,
        url=row.url,
        events=json.loads(row.events),
        description=row.description,
        status=EndpointStatus(row.status),
        disabled_reason=row.disabled_reason,
        created_at=at_us(row.created_at),
        updated_at=at_us(row.updated_at),
        secrets=[
            SigningSecret(x["s"], from_us(x["exp"]), x.get("k", ""))
            for x in json.loads(box.open(row.secrets, row.id))
        ],
        signature_scheme=SignatureScheme(row.signature_scheme),
        failing_level=row.failing_level,
        ordering=DeliveryOrder(row.ordering),
        filter=None if row.filter is None else json.loads(row.filter),
        filter_updated_at=from_us(row.filter_updated_at),
        payload=PayloadMode(row.payload),
        destination_type=(kind := DestinationType(row.destination_type)),
        destination=settings_of(
            kind,
            row.destination,
            box.open(row.destination_secret, row.id) if row.destination_secret else "",
        ),
        receiver_auth=of_stored(row.id, row.receiver_auth, box.open(row.receiver_secrets, row.id))
        if row.receiver_auth
        else None,
    )


def endpoint_values(e: EndpointRecord, box: SecretBox) -> dict[str, Any]:
    """An endpoint's columns (all but ``deleted_at``), its secrets, destination credentials and receiver
    secrets sealed."""
    destination, credentials = stored_json(e.destination)
    public, secrets = stored(e.receiver_auth)
    return {
        "id": e.id,
        "account_id": e.account_id,
        "environment": e.environment,
        "url": e.url,
        "events": json.dumps(e.events),
        "description": e.description,
        "status": e.status,
        "disabled_reason": e.disabled_reason,
        "secrets": box.seal(secrets_json(e.secrets), e.id),
        "created_at": us(e.created_at),
        "updated_at": us(e.updated_at),
        "signature_scheme": str(e.signature_scheme),
        "ordering": str(e.ordering),
        "filter": None if e.filter is None else canonical(e.filter),
        "filter_updated_at": None if e.filter_updated_at is None else us(e.filter_updated_at),
        "payload": str(e.payload),
        "destination_type": str(e.destination_type),
        "destination": destination,
        "destination_secret": box.seal(credentials, e.id) if credentials else "",
        "receiver_auth": public,
        "receiver_secrets": box.seal(secrets, e.id) if secrets else "",
    }


def event_of(row: Any) -> EventRecord:
    return EventRecord(
        id=row.id,
        account_id=row.account_id,
        environment=row.environment,
        type=row.type,
        state=row.state,
        created_at=at_us(row.created_at),
        envelope=bytes(row.envelope),
        seq=row.seq,
    )


def delivery_of(row: Any) -> DeliveryRecord:
    """A delivery from a row with at least ``DELIVERY_COLUMNS``: when it is pending, it is next due at
    ``due_at`` (``next_attempt_at`` may be a lease expiry)."""
    status = DeliveryStatus(row.status)
    return DeliveryRecord(
        id=row.id,
        event_id=row.event_id,
        endpoint_id=row.endpoint_id,
        account_id=row.account_id,
        environment=row.environment,
        event_type=row.event_type,
        status=status,
        attempt_count=row.attempt_count,
        schedule_count=row.schedule_count,
        next_attempt_at=from_us(row.due_at) if status is DeliveryStatus.PENDING else None,
        created_at=at_us(row.created_at),
        updated_at=at_us(row.updated_at),
        ordering_key=row.ordering_key,
        event_seq=row.event_seq,
    )


def delivery_row(d: DeliveryRecord) -> tuple[Any, ...]:
    """A new delivery's values in ``DELIVERY_INSERT_COLUMNS`` order: due when it is next due, no lease."""
    due = us(d.next_attempt_at) if d.next_attempt_at else None
    values = {
        **{f.name: getattr(d, f.name) for f in dataclasses.fields(DeliveryRecord)},
        "status": str(d.status),
        "due_at": due,
        # NULL: the queue row (wh_pending) holds it. A process of a release before revision 0009 claims
        # from this column; left NULL, it never claims what this release queued (webhookd._queue_sql).
        "next_attempt_at": None,
        "lease_owner": None,
        "created_at": us(d.created_at),
        "updated_at": us(d.updated_at),
    }
    return tuple(values[c] for c in DELIVERY_INSERT_COLUMNS)


def pending_row(d: DeliveryRecord) -> tuple[Any, ...]:
    """A new pending delivery's queue row in ``PENDING_COLUMNS`` order: due when it is next due, no lease."""
    values = {
        **{f.name: getattr(d, f.name) for f in dataclasses.fields(DeliveryRecord)},
        "next_attempt_at": us(d.next_attempt_at or d.created_at),
        "lease_owner": None,
    }
    return tuple(values[c] for c in PENDING_COLUMNS)


def attempt_of(row: Any) -> AttemptRecord:
    values = {c: getattr(row, c) for c in ATTEMPT_COLUMNS}
    values["request_headers"] = json.loads(row.request_headers)
    values["response_headers"] = json.loads(row.response_headers)
    values["attempted_at"] = at_us(row.attempted_at)
    values["manual"] = bool(row.manual)
    return AttemptRecord(**values)


# Every attempt a cycle writes goes through ``attempt_row``: one C call reads its fields in column order.
_ATTEMPT_VALUES = operator.attrgetter(*ATTEMPT_COLUMNS)
_HEADER_MAPS = (ATTEMPT_COLUMNS.index("request_headers"), ATTEMPT_COLUMNS.index("response_headers"))
_ATTEMPTED_AT = ATTEMPT_COLUMNS.index("attempted_at")


def attempt_row(a: AttemptRecord) -> tuple[Any, ...]:
    """An attempt's values in ``ATTEMPT_COLUMNS`` order."""
    values = list(_ATTEMPT_VALUES(a))
    for i in _HEADER_MAPS:
        values[i] = json.dumps(values[i]) if values[i] else "{}"  # most responses' headers: none kept
    values[_ATTEMPTED_AT] = us(values[_ATTEMPTED_AT])
    return tuple(values)


def alert_of(row: Any) -> Alert:
    return Alert(
        id=row.id,
        account_id=row.account_id,
        environment=row.environment,
        endpoint_id=row.endpoint_id,
        url=row.url,
        reason=row.reason,
        created_at=at_us(row.created_at),
    )
