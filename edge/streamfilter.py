"""Which events a key may receive on /v1/stream (decisions.md "Stream"). Pure."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from svckit.events import EVENT_KINDS
from svckit.scopes import PRODUCTS

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
    """Any one of the returned scopes lets a key read the event.

    booking.* and payment.*: the product's ``<resource>:read``, the product taken from the event's
    ``data.product``; without one, any product's read scope. esim.*: ``esim:read``. The rest:
    ``account:read``.
    """
    family = event_type.split(".", 1)[0]
    if family in ("booking", "payment"):
        product = (data or {}).get("product")
        if isinstance(product, str) and product in PRODUCTS:
            return (f"{product}:read",)
        return tuple(f"{p}:read" for p in PRODUCTS)
    if family == "esim":
        return ("esim:read",)
    return ("account:read",)


def readable_kinds(scopes: Collection[str]) -> list[str]:
    """The event kinds a key could read at all (a booking or payment event: if it reads any product);
    ``may_read`` then decides each event by its data."""
    samples: list[Mapping[str, Any] | None] = [None, *({"product": p} for p in PRODUCTS)]
    return [k for k in EVENT_KINDS if any(may_read(scopes, k, data) for data in samples)]


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
