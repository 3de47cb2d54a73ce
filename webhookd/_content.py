"""What of an event reaches an endpoint: whether (its content filter, svckit.jsonmatch) and how much (its
payload mode: the stored envelope, or its thin form, svckit.thinevents).

A filtered-out event is not a delivery: the fan-out (``_sql.SqlRepository.publish``) makes none, so it is
never counted, sent, retried or logged as an attempt. Nothing is stored for it either: the portal's event
page shows it as filtered by evaluating the endpoint's filter (the same pure function on the same
immutable event), which keeps a filter that drops most of a busy kind free of storage
(docs/webhooks.md "Filters").
"""

from __future__ import annotations

import json
from typing import Any

from svckit.jsonmatch import StepBudget, document_of_envelope, matches
from svckit.thinevents import thin_envelope
from svckit.webhook_status import PayloadMode
from webhookd._metrics import EVENTS_FILTERED
from webhookd._repository import EndpointRecord, EventRecord


class Passes:
    """Whether ``event`` passes an endpoint's stored filter (compact JSON text, None: no filter); the
    event's document is read once, on the first filter."""

    def __init__(self, event: EventRecord) -> None:
        self.event = event
        self._doc: dict[str, Any] | None = None
        # One budget for all the publish's filters: an account's many endpoints with costly filters cost
        # the publish (inside the store's write transaction) no more than one filter may.
        self._budget = StepBudget()

    def __call__(self, stored_filter: str | None) -> bool:
        if stored_filter is None:
            return True
        if self._doc is None:
            self._doc = document_of_envelope(json.loads(self.event.envelope))
        if matches(self._doc, json.loads(stored_filter), self._budget):
            return True
        EVENTS_FILTERED.inc()
        return False


def body_for(endpoint: EndpointRecord, envelope: bytes) -> bytes:
    """The bytes sent to ``endpoint`` (and signed): the stored envelope, or its thin form."""
    if endpoint.payload is not PayloadMode.THIN:
        return envelope
    thin = thin_envelope(json.loads(envelope))
    return json.dumps(thin, separators=(",", ":"), ensure_ascii=False).encode()
