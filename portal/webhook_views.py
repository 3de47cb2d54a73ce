"""Pure decisions of the endpoint, events, delivery and sandbox clock pages: the payload as a reader sees
it, attempts newest first, which delivery of a listing is the page's, the sandbox clock's choices and
notice, an endpoint's signature scheme as the form spells it, and the recovery's question and notice.
No I/O; the routes (portal.routes.webhooks, .events, .deliveries) call webhookd."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Sequence
from enum import StrEnum
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode

from svckit.clients import ClientError
from svckit.durations import clock_advance
from svckit.filtercheck import FilterError, canonical, parse_filter
from svckit.jsonmatch import document_of_envelope, matches
from svckit.prototables import DELIVERY_ORDER, PAYLOAD_MODE, SIGNATURE_SCHEME, EnumTable
from svckit.signing import SignatureScheme
from svckit.webhook_status import DeliveryOrder, PayloadMode
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

E = TypeVar("E", bound=StrEnum)


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


def _form_word(table: EnumTable[E], number: int, default: E) -> str:
    """A proto number as the endpoint form spells it; UNSPECIFIED (or unknown) reads as ``default``."""
    return table.get(number, default.value) or default.value


def _form_number(table: EnumTable[E], word: str, default: E, field: str) -> Any:
    """The form's ``word`` as its proto number ("" is ``default``); anything else is refused beside
    ``field``."""
    if not word:
        return table.pb(default)
    if word not in tuple(table.words):
        choices = ", ".join(m.value for m in table.words)
        raise ClientError("invalid_request", f"choose one of {choices}", field=field)
    return table.pb(word)


def scheme_word(number: int) -> str:
    """An endpoint's ``signature_scheme`` as the form spells it; UNSPECIFIED reads as the default."""
    return _form_word(SIGNATURE_SCHEME, number, SignatureScheme.STRIPE)


def scheme_number(word: str) -> wpb.SignatureScheme.ValueType:
    """The form's ``signature_scheme`` as its proto number ("" is the default); anything else is refused
    beside the field."""
    number: wpb.SignatureScheme.ValueType = _form_number(
        SIGNATURE_SCHEME, word, SignatureScheme.STRIPE, "signature_scheme"
    )
    return number


# The endpoint form's delivery orders (docs/webhooks.md "Ordered delivery").
ORDERING_CHOICES: tuple[tuple[str, str], ...] = (
    (DeliveryOrder.UNORDERED.value, "in parallel (the default)"),
    (DeliveryOrder.PER_RESOURCE.value, "one at a time per booking or eSIM order, oldest event first"),
)


def ordering_word(number: int) -> str:
    """An endpoint's ``ordering`` as the form spells it; UNSPECIFIED reads as the default."""
    return _form_word(DELIVERY_ORDER, number, DeliveryOrder.UNORDERED)


def ordering_number(word: str) -> wpb.DeliveryOrder.ValueType:
    """The form's ``ordering`` as its proto number ("" is the default); anything else is refused beside
    the field."""
    number: wpb.DeliveryOrder.ValueType = _form_number(
        DELIVERY_ORDER, word, DeliveryOrder.UNORDERED, "ordering"
    )
    return number


# The endpoint form's payload modes (docs/webhooks.md "Thin payloads").
PAYLOAD_CHOICES: tuple[tuple[str, str], ...] = (
    (PayloadMode.FULL.value, "the whole event (the default)"),
    (PayloadMode.THIN.value, "id, type, time and resource ids only; the rest read with GET /v1/events/{id}"),
)


def payload_word(number: int) -> str:
    """An endpoint's ``payload`` as the form spells it; UNSPECIFIED reads as the default."""
    return _form_word(PAYLOAD_MODE, number, PayloadMode.FULL)


def payload_number(word: str) -> wpb.PayloadMode.ValueType:
    """The form's ``payload`` as its proto number ("" is the default); anything else is refused beside
    the field."""
    number: wpb.PayloadMode.ValueType = _form_number(PAYLOAD_MODE, word, PayloadMode.FULL, "payload")
    return number


def filter_json(text: str) -> str:
    """The form's filter (JSON text, blank: none) checked before it is sent, as webhookd stores it; a bad
    one is refused beside the field, naming the operator's path (svckit.filtercheck)."""
    try:
        flt = parse_filter(text)
    except FilterError as exc:
        raise ClientError("invalid_request", str(exc), field="filter") from None
    return "" if flt is None else canonical(flt)


def filter_text(stored: str) -> str:
    """An endpoint's stored filter as the form shows it (indented JSON); "" for none."""
    return pretty_json(stored)


def filtered_out(
    event: wpb.Event, endpoints: Iterable[wpb.Endpoint], delivered: Iterable[str]
) -> list[tuple[wpb.Endpoint, bool]]:
    """The endpoints an event was filtered out for, as the event page shows them: subscribed to its kind,
    made before it, without a delivery of it, and whose filter does not match it; with whether that filter
    was changed after the event (then the verdict is the current filter's, not necessarily the one the
    event met). webhookd stores nothing for a filtered event (docs/webhooks.md "Filters"): the filter is a
    pure function of the immutable event, so evaluating it again gives the answer it gave."""
    got = set(delivered)
    created = (event.created_at.seconds, event.created_at.nanos)
    out = []
    document = document_of_envelope(json.loads(event.envelope_json or "{}"))
    for ep in endpoints:
        if not ep.filter_json or ep.id in got:
            continue
        if "*" not in ep.events and event.type not in ep.events:
            continue
        if (ep.created_at.seconds, ep.created_at.nanos) > created:
            continue
        if matches(document, json.loads(ep.filter_json)):
            continue
        out.append((ep, (ep.filter_updated_at.seconds, ep.filter_updated_at.nanos) > created))
    return out


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
        "filter": filter_text(endpoint.filter_json),
        "payload": payload_word(endpoint.payload),
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
