"""Pure decisions of the endpoint, events, delivery and sandbox clock pages: the payload as a reader sees
it, attempts newest first, which delivery of a listing is the page's, the sandbox clock's choices and
notice, an endpoint's signature scheme as the form spells it, and the recovery's question and notice.
No I/O; the routes (portal.routes.webhooks, .events, .deliveries) call webhookd."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Sequence
from urllib.parse import parse_qsl, urlencode

from svckit.clients import ClientError
from svckit.durations import clock_advance
from svckit.prototables import DELIVERY_ORDER, SIGNATURE_SCHEME
from svckit.signing import SignatureScheme
from svckit.webhook_status import DeliveryOrder
from travel.webhooks.v1 import webhooks_pb2 as wpb

# The kind of the events SendTestEvent makes: delivered like any other, never in the event log
# (webhookd's ListEvents and GetEvent answer only svckit.events.EVENT_KINDS).
TEST_EVENT_KIND = "webhook.test"
# What the sandbox clock form offers, as svc clock advance spells them.
CLOCK_CHOICES: tuple[str, ...] = ("1m", "5m", "30m", "2h", "6h", "24h")
# The pages the clock form is on, where its 303 goes back to.
CLOCK_PAGES: tuple[str, ...] = ("webhooks", "deliveries")
# The delivery log's filter fields (its query string).
DELIVERY_FILTERS: tuple[str, ...] = ("endpoint_id", "event_kind", "status", "since", "until")


def pretty_json(text: str) -> str:
    """A JSON document indented for reading (keys in their order); anything else as it is."""
    if not text:
        return ""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return json.dumps(value, indent=2, ensure_ascii=False)


def newest_first(attempts: Iterable[wpb.Attempt]) -> list[wpb.Attempt]:
    """A delivery's attempts, the latest first: by when they were made, then by number (a resend made in
    the same instant as the attempt it repeats comes first)."""
    return sorted(
        attempts,
        key=lambda a: (a.attempted_at.seconds, a.attempted_at.nanos, a.attempt_number),
        reverse=True,
    )


def delivery_in(deliveries: Sequence[wpb.Delivery], delivery_id: str) -> wpb.Delivery | None:
    """The delivery ``delivery_id`` of a listing, or None."""
    return next((d for d in deliveries if d.id == delivery_id), None)


def has_event_page(kind: str) -> bool:
    """Whether an event of ``kind`` is in the event log (test events are not)."""
    return bool(kind) and kind != TEST_EVENT_KIND


def clock_span(choice: str) -> dt.timedelta:
    """One of ``CLOCK_CHOICES`` as a span; anything else is refused beside the form's field."""
    if choice not in CLOCK_CHOICES:
        raise ClientError("invalid_request", f"choose one of {', '.join(CLOCK_CHOICES)}", field="by")
    return clock_advance(choice)


def clock_back(env: str, page: str, query: str = "") -> str:
    """Where the clock form's 303 goes: the page it was on, the webhooks page when that is unknown, with
    the delivery log's filter it showed (``query``; only ``DELIVERY_FILTERS``, anything else dropped), so
    an advance on a filtered log comes back to the same filter."""
    page = page if page in CLOCK_PAGES else CLOCK_PAGES[0]
    kept = (
        [(k, v) for k, v in parse_qsl(query) if k in DELIVERY_FILTERS and v] if page == "deliveries" else []
    )
    return f"/{env}/{page}" + (f"?{urlencode(kept)}" if kept else "")


def filter_query(q: dict[str, str]) -> str:
    """The delivery log's filter ``q`` as the clock form carries it back (``clock_back``)."""
    return urlencode([(k, q[k]) for k in DELIVERY_FILTERS if q.get(k)])


def clock_notice(choice: str, due: int) -> str:
    """What the page says after an advance: ``Sandbox clock advanced by 2h: 3 deliveries due now``."""
    noun = "delivery" if due == 1 else "deliveries"
    return f"Sandbox clock advanced by {choice}: {due} {noun} due now"


# The endpoint form's signature schemes, in the order it offers them, each with what it sends.
SCHEME_CHOICES: tuple[tuple[str, str], ...] = (
    (SignatureScheme.STRIPE.value, "X-Service-Signature (the default)"),
    (SignatureScheme.STANDARD.value, "Standard Webhooks: webhook-signature v1 (HMAC) and v1a (ed25519)"),
    (SignatureScheme.BOTH.value, "Both sets of headers"),
)


def scheme_word(number: int) -> str:
    """An endpoint's ``signature_scheme`` as the form spells it; UNSPECIFIED reads as the default."""
    return SIGNATURE_SCHEME.get(number, SignatureScheme.STRIPE.value) or SignatureScheme.STRIPE.value


def scheme_number(word: str) -> wpb.SignatureScheme.ValueType:
    """The form's ``signature_scheme`` as its proto number ("" is the default); anything else is refused
    beside the field."""
    if not word:
        return wpb.SIGNATURE_SCHEME_STRIPE
    if word not in tuple(SignatureScheme):
        choices = ", ".join(s.value for s in SignatureScheme)
        raise ClientError("invalid_request", f"choose one of {choices}", field="signature_scheme")
    number: wpb.SignatureScheme.ValueType = SIGNATURE_SCHEME.pb(word)
    return number


# The endpoint form's delivery orders (docs/webhooks.md "Ordered delivery").
ORDERING_CHOICES: tuple[tuple[str, str], ...] = (
    (DeliveryOrder.UNORDERED.value, "in parallel (the default)"),
    (DeliveryOrder.PER_RESOURCE.value, "one at a time per booking or eSIM order, oldest event first"),
)


def ordering_word(number: int) -> str:
    """An endpoint's ``ordering`` as the form spells it; UNSPECIFIED reads as the default."""
    return DELIVERY_ORDER.get(number, DeliveryOrder.UNORDERED.value) or DeliveryOrder.UNORDERED.value


def ordering_number(word: str) -> wpb.DeliveryOrder.ValueType:
    """The form's ``ordering`` as its proto number ("" is the default); anything else is refused beside
    the field."""
    if not word:
        return wpb.DELIVERY_ORDER_UNORDERED
    if word not in tuple(DeliveryOrder):
        choices = ", ".join(o.value for o in DeliveryOrder)
        raise ClientError("invalid_request", f"choose one of {choices}", field="ordering")
    number: wpb.DeliveryOrder.ValueType = DELIVERY_ORDER.pb(word)
    return number


def signs_ed25519(word: str) -> bool:
    """Whether deliveries of that scheme carry ``v1a`` signatures (so the page shows the public keys)."""
    return word in (SignatureScheme.STANDARD.value, SignatureScheme.BOTH.value)


def endpoint_values(endpoint: wpb.Endpoint) -> dict[str, object]:
    """An endpoint as its edit form's values."""
    return {
        "url": endpoint.url,
        "description": endpoint.description,
        "events": list(endpoint.events),
        "signature_scheme": scheme_word(endpoint.signature_scheme),
        "ordering": ordering_word(endpoint.ordering),
    }


def recover_question(count: int, since: str) -> tuple[str, str]:
    """The recovery's confirmation after its dry run: (title, explanation)."""
    noun = "delivery" if count == 1 else "deliveries"
    if not count:
        return (
            "Nothing to recover",
            f"No failed or held delivery of this endpoint since {since}. Recovering now sends nothing, "
            "unless one fails in the meantime.",
        )
    return (
        f"Recover {count} {noun}?",
        f"{count} {noun} failed or held since {since} will be queued again, each with a fresh retry "
        "schedule. The endpoint must be enabled for them to be sent.",
    )


def recover_notice(count: int, since: str) -> str:
    noun = "delivery" if count == 1 else "deliveries"
    return f"{count} {noun} queued (failed or held since {since})."
