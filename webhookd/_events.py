"""Event kinds (spec section 6, a closed list) and the delivery envelope (decisions.md "Webhooks")."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping
from typing import Any

from svckit.catalog import timestamp
from svckit.events import EVENT_KINDS
from svckit.vocabulary import Environment
from webhookd._errors import InvalidRequest, PayloadTooLarge

# Sent only by SendTestEvent, only to the endpoint under test; never published, never streamed.
TEST_EVENT_KIND = "webhook.test"

# Largest envelope we accept and send (Stripe and Svix are in the same range).
MAX_PAYLOAD_BYTES = 256 * 1024
# An account's sandbox events stored in any 24 hours (PublishEvent answers rate_limited past it; live events
# are never bounded this way), and how long sandbox attempts are kept (live: ATTEMPT_RETENTION, 30 days).
SANDBOX_EVENTS_PER_DAY = 1000
SANDBOX_RETENTION = dt.timedelta(days=7)

__all__ = [
    "EVENT_KINDS",
    "MAX_PAYLOAD_BYTES",
    "SANDBOX_EVENTS_PER_DAY",
    "SANDBOX_RETENTION",
    "TEST_EVENT_KIND",
    "Environment",
    "build_envelope",
    "check_event_kinds",
]


def check_event_kinds(kinds: Iterable[str], field: str = "events") -> list[str]:
    """Validated, de-duplicated, in order given; unknown kind or empty list -> InvalidRequest."""
    out: list[str] = []
    for kind in kinds:
        if kind not in EVENT_KINDS:
            raise InvalidRequest(
                f"{field}: unknown event kind {kind!r}; known kinds: {', '.join(EVENT_KINDS)}"
            )
        if kind not in out:
            out.append(kind)
    if not out:
        raise InvalidRequest(f"{field}: at least one event kind is required")
    return out


def build_envelope(
    *,
    event_id: str,
    kind: str,
    created: dt.datetime,
    environment: Environment,
    account_id: str,
    state: str,
    data: Mapping[str, Any],
) -> bytes:
    """The exact body sent to every endpoint: serialised once here and stored as these bytes."""
    body = json.dumps(
        {
            "id": event_id,
            "type": kind,
            "created": timestamp(created),  # the catalog's one encoding of an event's time
            "livemode": environment is Environment.LIVE,
            "account": account_id,
            "state": state,
            "data": dict(data),
        },
        separators=(",", ":"),
        ensure_ascii=False,
        sort_keys=False,
    ).encode()
    if len(body) > MAX_PAYLOAD_BYTES:
        raise PayloadTooLarge(f"data: event envelope is {len(body)} bytes, limit {MAX_PAYLOAD_BYTES}")
    return body
