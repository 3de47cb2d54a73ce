"""Who may publish an event: the event catalog names each kind's publishers (svckit.eventkinds), and this
decides one publish from that data alone. Pure; standard library only.

Why: a signed event is what a partner acts on (issue a voucher, stop selling, rotate a key), and any
service holding a certificate of our CA can call PublishEvent. Without this a hotels service could
announce a revoked key, billing a confirmed booking, the eSIM service a cancelled flight, to any
account. So:

- a kind's publishers (``EventKind.publishers``: authsvc the key, quota and ledger events, billing the
  settlement ones, webhookd its operational ones) publish it, live and sandbox;
- a product service (``product:<name>``) publishes the kinds that name it, and only about its own
  product: the event's ``data.product`` must be ``<name>`` (the subject of booking.failed and payment.* is
  a booking or an eSIM order, so those are the eSIM service's too, about its orders);
- the edge publishes the sandbox's events (every kind the catalog gives the sandbox: samples, trigger
  warnings, the simulator) and never a live one, so a compromised edge cannot send partners signed live
  events; the operators' CLI (svcctl) likewise, to reproduce a partner's case in the sandbox;
- a plaintext development server (``--insecure-dev``: no certificate, identity "") has no identity to
  hold against anyone and refuses nobody;
- anyone else (the portal, a product the catalog does not know, an unknown certificate): nothing.

Whether ``data`` itself is an event of its kind is the schema's business (svckit.eventcheck), checked for
every publisher alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from svckit.eventkinds import KINDS, PRODUCT_PREFIX, SANDBOX_PUBLISHER

__all__ = [
    "LIVE",
    "NOT_A_PUBLISHER",
    "OTHER_PRODUCT",
    "PLAINTEXT",
    "SANDBOX_ONLY",
    "SANDBOX_PUBLISHERS",
    "PublishRefusal",
    "may_publish",
    "publish_refusal",
]

LIVE = "live"
PLAINTEXT = ""  # the identity of a caller of a plaintext (--insecure-dev) server
# Who publishes the sandbox's events and never live ones: the edge, and the operators' CLI.
SANDBOX_PUBLISHERS = frozenset({SANDBOX_PUBLISHER, "svcctl"})

MAX_QUOTED = 40  # characters of a sent value a message quotes

# Refusal reasons (a metric label each: webhookd_events_refused_total).
NOT_A_PUBLISHER = "not_a_publisher"
SANDBOX_ONLY = "sandbox_only"
OTHER_PRODUCT = "other_product"


@dataclass(frozen=True, slots=True)
class PublishRefusal:
    reason: str  # NOT_A_PUBLISHER, SANDBOX_ONLY or OTHER_PRODUCT
    message: str  # for the caller (PERMISSION_DENIED's message)


def publish_refusal(
    identity: str, kind: str, environment: str, data: Mapping[str, Any] | None
) -> PublishRefusal | None:
    """Why the service whose certificate names ``identity`` may not publish an event of ``kind`` in
    ``environment`` ("live" or "sandbox") with ``data``; None when it may."""
    if identity == PLAINTEXT:
        return None
    entry = KINDS.get(kind)
    if entry is None:
        return PublishRefusal(NOT_A_PUBLISHER, f"type: {kind!r} is not a kind anyone publishes")
    live = environment == LIVE
    if identity in SANDBOX_PUBLISHERS:
        if not entry.sandbox:
            return PublishRefusal(NOT_A_PUBLISHER, f"type: the sandbox does not send {kind} events")
        if live:
            return PublishRefusal(
                SANDBOX_ONLY, f"the service {identity!r} may publish sandbox events only, not live {kind}"
            )
        return None
    if identity not in entry.publishers:
        return PublishRefusal(
            NOT_A_PUBLISHER,
            f"type: the service {identity!r} may not publish {kind} events; "
            f"their publishers are {', '.join(entry.publishers)}",
        )
    if identity.startswith(PRODUCT_PREFIX):
        own = identity[len(PRODUCT_PREFIX) :]
        product = (data or {}).get("product")
        if product != own:
            shown = repr(product)[:MAX_QUOTED]
            return PublishRefusal(
                OTHER_PRODUCT,
                f"data.product: {shown}: the service {identity!r} publishes events about {own} only",
            )
    return None


def may_publish(identity: str, kind: str, environment: str, data: Mapping[str, Any] | None) -> bool:
    """May ``identity`` publish this event? (``publish_refusal`` is None.)"""
    return publish_refusal(identity, kind, environment, data) is None
