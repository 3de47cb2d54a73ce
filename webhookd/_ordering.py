"""Pure: ordered delivery (docs/webhooks.md "Ordered delivery").

An endpoint asks for per-resource order (``DeliveryOrder.PER_RESOURCE``); each delivery to it is stored
with its event's ordering key (the booking or eSIM order the event is about, as the event catalog declares
per kind: ``svckit.eventkinds.EventKind.ordering``) and its event's sequence number. A delivery is held
back while an earlier one (lower event seq) for the same endpoint and key is still pending: in flight, or
waiting for a retry. So one delivery per (endpoint, key) is in flight, keys go in parallel, and a retrying
head keeps its key's later events waiting (strict FIFO).

What releases the next one: the head succeeded, or it failed for good (its retries ran out, its endpoint
was deleted). A held delivery (its endpoint disabled) holds nothing back: nothing of a disabled endpoint
is sent, and after it is enabled again new events flow at once; recovering brings the held ones back as
pending, oldest first, and they go before the later ones of their keys.

Unordered endpoints and kinds without a key store no key: nothing is ever held back for them, and the
claim never looks further (``webhookd._queue_sql`` writes the same rule in SQL; the memory queue runs
``held_back`` itself).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from svckit.eventkinds import KINDS
from svckit.webhook_status import DeliveryOrder, DeliveryStatus

# The statuses of an earlier delivery that hold a later one of its key back.
HOLDS_BACK = frozenset({DeliveryStatus.PENDING})


def ordering_key(order: DeliveryOrder, kind: str, data: Mapping[str, Any]) -> str | None:
    """The key a new delivery of a ``kind`` event with ``data`` is stored with, for an endpoint of
    ``order``: None (never held back) when the endpoint is unordered or the kind names no resource."""
    if order is not DeliveryOrder.PER_RESOURCE:
        return None
    entry = KINDS.get(kind)
    return entry.ordering_key(data) if entry is not None else None


def held_back(key: str | None, seq: int, earlier: Iterable[tuple[str | None, int, str]]) -> bool:
    """Whether a delivery with ``key`` for event ``seq`` waits, given the (key, event seq, status) of the
    other deliveries to its endpoint."""
    if key is None:
        return False
    return any(k == key and s < seq and status in HOLDS_BACK for k, s, status in earlier)
