"""Which events a key may receive on /v1/stream (decisions.md "Stream"). Pure.

Who reads a kind is the event catalog's (``EventKind.reader``, svckit.eventkinds), so a new kind names
its readers where it is defined: booking and payment events the read scope of the event's own product,
eSIM events ``esim:read``, the rest ``account:read``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from svckit.catalog import KINDS
from svckit.events import EVENT_KINDS

_FAMILIES = {k.split(".", 1)[0] for k in EVENT_KINDS}


def unknown_patterns(patterns: Collection[str]) -> list[str]:
    """Entries of a subscribe message's ``events`` naming no event kind (``*``, ``family.*`` allowed)."""
    out = []
    for p in patterns:
        if p == "*" or p in EVENT_KINDS or (p.endswith(".*") and p[:-2] in _FAMILIES):
            continue
        out.append(p)
    return out


def scopes_for_event(event_type: str, data: Mapping[str, Any] | None) -> tuple[str, ...]:
    """Any one of the returned scopes lets a key read the event: the catalog's readers of its kind
    (``EventKind.read_scopes``: a booking or payment event, the read scope of its ``data.product``,
    without one any product's); none for a kind the catalog does not have."""
    entry = KINDS.get(event_type)
    return () if entry is None else entry.read_scopes(data)


def readable_kinds(scopes: Collection[str]) -> list[str]:
    """The event kinds a key could read at all (a booking or payment event: if it reads any of the kind's
    products); ``may_read`` then decides each event by its data."""
    return [k for k, entry in KINDS.items() if any(s in scopes for s in entry.readers)]


def may_read(scopes: Collection[str], event_type: str, data: Mapping[str, Any] | None) -> bool:
    return any(s in scopes for s in scopes_for_event(event_type, data))


def wanted(subscribed: Collection[str] | None, event_type: str) -> bool:
    """A subscribe message's ``events`` list (None or empty: everything); ``booking.*`` matches a family."""
    if not subscribed:
        return True
    for pattern in subscribed:
        if pattern == event_type or pattern == "*":
            return True
        if pattern.endswith(".*") and event_type.startswith(pattern[:-1]):
            return True
    return False
