"""The event kinds of the catalog (``svckit.catalog``): for each, what it means, the ``state`` its envelope
carries, and the JSON Schema (draft 2020-12) of its ``data``. Standard library only.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from svckit.quota import THRESHOLD_PERCENT

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


# -- who publishes a kind, who reads it ----------------------------------------------------------------------
# Publishers are the certificate identities of the services (svckit.peers) that own what a kind reports.
# A product service is ``product:<name>``; it publishes only events about its own product
# (``data.product``), so a hotels certificate cannot announce a flight or an eSIM.
AUTHSVC, WEBHOOKD, BILLING = "authsvc", "webhookd", "billing"
PRODUCT_PREFIX = "product:"
# The sandbox's events (samples, trigger warnings, the simulator) are the edge's, and sandbox ones only.
SANDBOX_PUBLISHER = "edge"
BOOKING_PRODUCTS = ("hotels", "flights")  # their subject is a booking
ORDER_PRODUCTS = ("esim",)  # its subject is an eSIM order
# A kind's reader: the read scope of the product the event is about (``<product>:read``).
BY_PRODUCT = "<product>:read"


def product_service(product: str) -> str:
    """The certificate identity of ``product``'s service."""
    return PRODUCT_PREFIX + product


@dataclass(frozen=True)
class EventKind:
    kind: str
    description: str  # when it fires (one line)
    states: tuple[
        str, ...
    ]  # the envelope's ``state``: the subject's state after the event; the first is usual
    # Who publishes it, live and sandbox: certificate identities (``product:<name>`` for a product's).
    publishers: tuple[str, ...]
    # The scope that lets a key read it on the stream (and GET /v1/events): BY_PRODUCT for the event's own
    # product's ``<product>:read``.
    reader: str
    schema: Mapping[str, Any]  # JSON Schema of ``data``
    mode: str = ""  # "A" or "B" when the kind exists for accounts of that commercial mode only
    subscribable: bool = True  # webhook.test is sent by a test send only, never published
    # The ``data`` fields naming the resource the event is about, the first one present being the
    # event's ordering key (docs/webhooks.md "Ordered delivery"); () for kinds never held back.
    ordering: tuple[str, ...] = ()
    # The sandbox (SANDBOX_PUBLISHER) sends samples of it (POST /v1/sandbox/events, triggers, simulator).
    sandbox: bool = True

    @property
    def state(self) -> str:
        return self.states[0]

    @property
    def products(self) -> tuple[str, ...]:
        """The products whose services publish it (each only about itself)."""
        return tuple(p[len(PRODUCT_PREFIX) :] for p in self.publishers if p.startswith(PRODUCT_PREFIX))

    @property
    def services(self) -> tuple[str, ...]:
        """The publishers that are not product services."""
        return tuple(p for p in self.publishers if not p.startswith(PRODUCT_PREFIX))

    @property
    def readers(self) -> tuple[str, ...]:
        """Every scope that may read some event of the kind."""
        if self.reader == BY_PRODUCT:
            return tuple(f"{p}:read" for p in self.products)
        return (self.reader,)

    def read_scopes(self, data: Mapping[str, Any] | None) -> tuple[str, ...]:
        """Any one of these scopes lets a key read this event (``data``: its data): a booking or payment
        event, its own product's read scope; without a product it names, any of the kind's readers."""
        if self.reader == BY_PRODUCT:
            product = (data or {}).get("product")
            if isinstance(product, str) and product in self.products:
                return (f"{product}:read",)
        return self.readers

    @property
    def publisher(self) -> str:
        """Who publishes it, for a person (docs/events.md): derived from ``publishers``."""
        names = []
        if self.products:
            products = ", ".join(f"`{product_service(p)}`" for p in self.products)
            plural = "s" if len(self.products) > 1 else ""
            names.append(f"the product service{plural} {products}, of its own product (`data.product`)")
        names += [f"`{s}`" for s in self.services]
        if self.sandbox:
            names.append(f"the sandbox (`{SANDBOX_PUBLISHER}`, sandbox events only)")
        return "; ".join(names)

    def ordering_key(self, data: Mapping[str, Any]) -> str | None:
        """The resource ``data`` is about (a booking or eSIM order id), or None."""
        for name in self.ordering:
            value = data.get(name)
            if isinstance(value, str) and value:
                return value
        return None


# -- schema building blocks --------------------------------------------------------------------------------
def _str(description: str, **kw: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **kw}


def _id(prefix: str, description: str) -> dict[str, Any]:
    return _str(description, pattern=f"^{prefix}_[A-Za-z0-9_]+$")


def _int(description: str, **kw: Any) -> dict[str, Any]:
    return {"type": "integer", "description": description, **kw}


def _date(description: str) -> dict[str, Any]:
    return _str(description, format="date", pattern=r"^\d{4}-\d{2}-\d{2}$")


def _timestamp(description: str) -> dict[str, Any]:
    return _str(description, format="date-time", pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


AMOUNT = _int("amount in minor units of `currency` (25800 EUR is 258.00 EUR)", minimum=0)
CURRENCY = _str("ISO 4217 currency code", pattern="^[A-Z]{3}$")
CUSTOMER_REF = _str("the partner's X-Partner-Customer-Ref, when one was sent", minLength=1)
BOOKING_FIELDS: dict[str, Any] = {
    "booking": _id("bk", "the booking"),
    "order": _id("ord", "the eSIM order"),
    "product": {"enum": [*BOOKING_PRODUCTS, *ORDER_PRODUCTS], "description": "the product"},
    "offer": _id("off", "the booked offer (a booking)"),
    "plan": _id("plan", "the eSIM plan (an order)"),
    "amount": AMOUNT,
    "currency": CURRENCY,
    "customerRef": CUSTOMER_REF,
}
# The subject of a booking or payment event: a booking (hotels, flights) or an eSIM order.
BOOKING_SUBJECT = {
    "required": ["booking", "offer"],
    "properties": {"product": {"enum": list(BOOKING_PRODUCTS)}},
    "not": {"anyOf": [{"required": ["order"]}, {"required": ["plan"]}]},
}
ORDER_SUBJECT = {
    "required": ["order", "plan"],
    "properties": {"product": {"const": ORDER_PRODUCTS[0]}},
    "not": {"anyOf": [{"required": ["booking"]}, {"required": ["offer"]}]},
}
SUBJECT_REQUIRED = ["product", "amount", "currency"]


def _object(
    kind: str,
    properties: Mapping[str, Any],
    required: list[str],
    one_of: list[dict[str, Any]] | None = None,
    drop: tuple[str, ...] = (),
) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "$schema": SCHEMA_DIALECT,
        "title": f"{kind} data",
        "type": "object",
        "properties": {k: v for k, v in properties.items() if k not in drop},
        "required": required,
        "additionalProperties": False,
    }
    if one_of:
        schema["oneOf"] = one_of
    return schema


def _booking(
    kind: str,
    extra: Mapping[str, Any],
    required: list[str],
    subjects: str = "both",
    one_of: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A booking, payment or eSIM event: the subject's fields and ``extra``. ``subjects`` is "booking"
    (hotels, flights), "order" (eSIM) or "both" (exactly one of them)."""
    props = {**BOOKING_FIELDS, **extra}
    if subjects == "both":
        return _object(kind, props, [*SUBJECT_REQUIRED, *required], [BOOKING_SUBJECT, ORDER_SUBJECT])
    if subjects == "booking":
        drop, first = ("order", "plan"), ["booking", "offer"]
        props["product"] = {"enum": list(BOOKING_PRODUCTS), "description": "the product"}
    else:
        drop, first = ("booking", "offer"), ["order", "plan"]
        props["product"] = {"const": ORDER_PRODUCTS[0], "description": "the product"}
    return _object(kind, props, [*first, *SUBJECT_REQUIRED, *required], one_of, drop)


PAYMENT = _id("pay", "the traveller's payment")
HOLD = _id("hold", "the hold on the partner's credit (mode A)")
REASON = "machine-readable cause"
# Ordering keys: the booking, the eSIM order, or whichever of the two the event is about.
BY_BOOKING, BY_ORDER, BY_SUBJECT = ("booking",), ("order",), ("booking", "order")

# Publishers of a booking's kinds (hotels, flights), of a kind about a booking or an eSIM order (the
# schema's subjects: booking.failed and payment.*), and of an eSIM order's own kinds.
BOOKING_PUBLISHERS = tuple(product_service(p) for p in BOOKING_PRODUCTS)
SUBJECT_PUBLISHERS = tuple(product_service(p) for p in (*BOOKING_PRODUCTS, *ORDER_PRODUCTS))
ORDER_PUBLISHERS = tuple(product_service(p) for p in ORDER_PRODUCTS)
ACCOUNT_READ, ESIM_READ = "account:read", "esim:read"

# -- the catalog --------------------------------------------------------------------------------------------
_KINDS: tuple[EventKind, ...] = (
    EventKind(
        "booking.confirmed",
        "The supplier confirmed a booking: it is final and (mode A) held on credit or (mode B) paid.",
        ("confirmed",),
        BOOKING_PUBLISHERS,
        BY_PRODUCT,
        _booking(
            "booking.confirmed",
            {
                "supplierReference": _str("the supplier's reference of the booking", minLength=1),
                "hold": HOLD,
                "payment": _id("pay", "the traveller's payment (mode B)"),
            },
            ["supplierReference"],
            subjects="booking",
            one_of=[{"required": ["hold"]}, {"required": ["payment"]}],
        ),
        ordering=BY_BOOKING,
    ),
    EventKind(
        "booking.failed",
        "A booking (or eSIM order) could not be completed; nothing is charged.",
        ("failed",),
        SUBJECT_PUBLISHERS,
        BY_PRODUCT,
        _booking(
            "booking.failed",
            {
                "reason": _str(f"{REASON}, e.g. `supplier_declined`", minLength=1),
                "message": _str("what happened, for a person"),
                "holdReleased": {
                    "type": "boolean",
                    "description": "whether a hold on the partner's credit was released (mode A)",
                },
            },
            ["reason", "message", "holdReleased"],
        ),
        ordering=BY_SUBJECT,
    ),
    EventKind(
        "booking.cancelled",
        "A confirmed booking was cancelled.",
        ("cancelled",),
        BOOKING_PUBLISHERS,
        BY_PRODUCT,
        _booking(
            "booking.cancelled",
            {"cancelledBy": _str("who cancelled: `partner` or `supplier`", enum=["partner", "supplier"])},
            ["cancelledBy"],
            subjects="booking",
        ),
        ordering=BY_BOOKING,
    ),
    EventKind(
        "booking.modified",
        "A confirmed booking was changed; it stays confirmed.",
        ("confirmed",),
        BOOKING_PUBLISHERS,
        BY_PRODUCT,
        _booking(
            "booking.modified",
            {"changes": {"type": "object", "minProperties": 1, "description": "the fields changed, as sent"}},
            ["changes"],
            subjects="booking",
        ),
        ordering=BY_BOOKING,
    ),
    EventKind(
        "payment.succeeded",
        "The traveller's payment for a booking or order was captured (mode B).",
        ("succeeded",),
        SUBJECT_PUBLISHERS,
        BY_PRODUCT,
        _booking("payment.succeeded", {"payment": PAYMENT}, ["payment"]),
        mode="B",
        ordering=BY_SUBJECT,
    ),
    EventKind(
        "payment.failed",
        "The traveller's payment was declined (mode B); the booking fails next.",
        ("failed",),
        SUBJECT_PUBLISHERS,
        BY_PRODUCT,
        _booking(
            "payment.failed",
            {"payment": PAYMENT, "reason": _str(f"{REASON}, e.g. `card_declined`", minLength=1)},
            ["payment", "reason"],
        ),
        mode="B",
        ordering=BY_SUBJECT,
    ),
    EventKind(
        "payment.refunded",
        "The traveller's payment was refunded, after a cancellation (mode B).",
        ("refunded",),
        SUBJECT_PUBLISHERS,
        BY_PRODUCT,
        _booking(
            "payment.refunded", {"payment": PAYMENT, "refund": _id("re", "the refund")}, ["payment", "refund"]
        ),
        mode="B",
        ordering=BY_SUBJECT,
    ),
    EventKind(
        "esim.provisioned",
        "An eSIM order is ready: the traveller can install the eSIM.",
        ("provisioned",),
        ORDER_PUBLISHERS,
        ESIM_READ,
        _booking(
            "esim.provisioned",
            {
                "iccid": _str("the eSIM's ICCID", pattern="^[0-9]{18,22}$"),
                "activationCode": _str("the LPA activation code (for a QR code)", pattern="^LPA:"),
            },
            ["iccid", "activationCode"],
            subjects="order",
        ),
        ordering=BY_ORDER,
    ),
    EventKind(
        "esim.usage_threshold",
        "An active eSIM has used a share of its plan's data allowance.",
        ("active",),
        ORDER_PUBLISHERS,
        ESIM_READ,
        _booking(
            "esim.usage_threshold",
            {
                "thresholdPercent": _int(
                    "the share of the allowance reached, in percent", minimum=1, maximum=100
                ),
                "usedBytes": _int("data used so far", minimum=0),
                "limitBytes": _int("the plan's data allowance", minimum=0),
            },
            ["thresholdPercent", "usedBytes", "limitBytes"],
            subjects="order",
        ),
        ordering=BY_ORDER,
    ),
    EventKind(
        "ledger.low_balance",
        "The partner's credit fell below its warning level (mode A).",
        ("low_balance",),
        (AUTHSVC,),
        ACCOUNT_READ,
        _object(
            "ledger.low_balance",
            {
                "amount": _int("the credit balance, in minor units of `currency`"),
                "currency": CURRENCY,
                "warningLevel": _int("the balance under which this warning is sent, minor units", minimum=0),
            },
            ["amount", "currency", "warningLevel"],
        ),
        mode="A",
    ),
    EventKind(
        "search_quota.threshold",
        f"The day's searches reached {THRESHOLD_PERCENT} % of the daily search allowance (once a UTC day).",
        ("threshold_reached",),
        (AUTHSVC,),
        ACCOUNT_READ,
        _object(
            "search_quota.threshold",
            {
                "date": _date("the UTC day counted"),
                "searchesUsed": _int(
                    "searches counted that day, the one that crossed the threshold included", minimum=1
                ),
                "dailySearchAllowance": _int("the account's daily search allowance", minimum=1),
                "remaining": _int("searches left that day", minimum=0),
                "thresholdPercent": _int(
                    "the warning level, in percent of the allowance", const=THRESHOLD_PERCENT
                ),
            },
            ["date", "searchesUsed", "dailySearchAllowance", "remaining", "thresholdPercent"],
        ),
    ),
    EventKind(
        "settlement.invoice_issued",
        "The invoice of a settlement period was issued.",
        ("issued",),
        (BILLING,),
        ACCOUNT_READ,
        _object(
            "settlement.invoice_issued",
            {
                "invoice": _id("inv", "the invoice"),
                "settlement": _id("stl", "the settlement"),
                "amount": AMOUNT,
                "currency": CURRENCY,
                "periodStart": _date("the period's first day"),
                "periodEnd": _date("the period's last day"),
                "dueDate": _date("the day the invoice is due"),
            },
            ["invoice", "settlement", "amount", "currency", "periodStart", "periodEnd", "dueDate"],
        ),
    ),
    EventKind(
        "settlement.payment_failed",
        "Collecting a settlement invoice failed; the account turns read-only unless it is paid.",
        ("failed",),
        (BILLING,),
        ACCOUNT_READ,
        _object(
            "settlement.payment_failed",
            {
                "invoice": _id("inv", "the invoice"),
                "settlement": _id("stl", "the settlement"),
                "amount": AMOUNT,
                "currency": CURRENCY,
                "periodStart": _date("the period's first day"),
                "periodEnd": _date("the period's last day"),
                "reason": _str(f"{REASON}, e.g. `insufficient_funds`", minLength=1),
                "readOnlyAfter": _date("the day the account turns read-only if still unpaid"),
            },
            [
                "invoice",
                "settlement",
                "amount",
                "currency",
                "periodStart",
                "periodEnd",
                "reason",
                "readOnlyAfter",
            ],
        ),
    ),
    EventKind(
        "apikey.revoked",
        "An API key of the account was revoked, by anyone; it stopped working at once.",
        ("revoked",),
        (AUTHSVC,),
        ACCOUNT_READ,
        _object(
            "apikey.revoked",
            {
                "keyId": _id("key", "the revoked key"),
                "hint": _str("the key's visible hint (prefix and last characters)"),
                "name": _str("the key's name"),
                "revokedAt": _timestamp("when it was revoked"),
                "revokedBy": _str("who revoked it (a portal user or an operator); may be empty"),
                "reason": _str("the reason given; may be empty"),
            },
            ["keyId", "hint", "name", "revokedAt", "revokedBy", "reason"],
        ),
    ),
    EventKind(
        "apikey.leaked",
        "An API key of the account was found in public (reported by a secret scanner) and revoked at "
        "once; apikey.revoked fires too. Replace it with a new key.",
        ("revoked",),
        (AUTHSVC,),
        ACCOUNT_READ,
        _object(
            "apikey.leaked",
            {
                "keyId": _id("key", "the leaked key"),
                "hint": _str("the key's visible hint (prefix and last characters); never the secret"),
                "name": _str("the key's name"),
                "url": _str("where it was found in public; may be empty"),
                "source": _str("the scanner's kind of place (e.g. content, commit); may be empty"),
                "reporter": _str("who reported it (e.g. GitHub secret scanning)"),
                "revokedAt": _timestamp("when it was revoked"),
            },
            ["keyId", "hint", "name", "url", "source", "reporter", "revokedAt"],
        ),
    ),
    # Operational events about the account's own webhook endpoints (docs/webhooks.md "Operational
    # events"): never delivered to the endpoint they are about.
    EventKind(
        "endpoint.failing",
        "Deliveries to one of the account's endpoints keep failing: half its retries are spent "
        "(thresholdPercent 50), then all but the last (90); fired once per level until it recovers.",
        ("failing",),
        (WEBHOOKD,),
        ACCOUNT_READ,
        _object(
            "endpoint.failing",
            {
                "endpointId": _id("we", "the failing endpoint"),
                "url": _str("its URL"),
                "thresholdPercent": {"enum": [50, 90], "description": "how far along the road to disabling"},
                "attemptsFailed": _int(
                    "the failed attempts of the delivery that crossed the level", minimum=1
                ),
                "error": _str("what the last attempt got"),
            },
            ["endpointId", "url", "thresholdPercent", "attemptsFailed", "error"],
        ),
    ),
    EventKind(
        "endpoint.disabled",
        "One of the account's endpoints was disabled: a delivery's last retry failed, or it answered "
        "410 Gone. Its events are kept, not sent, until it is re-enabled and recovered.",
        ("disabled",),
        (WEBHOOKD,),
        ACCOUNT_READ,
        _object(
            "endpoint.disabled",
            {
                "endpointId": _id("we", "the disabled endpoint"),
                "url": _str("its URL"),
                "reason": _str("why it was disabled"),
                "disabledAt": _timestamp("when"),
            },
            ["endpointId", "url", "reason", "disabledAt"],
        ),
    ),
    EventKind(
        "endpoint.recovered",
        "An endpoint that was failing or disabled answered a delivery with 2xx again.",
        ("enabled",),
        (WEBHOOKD,),
        ACCOUNT_READ,
        _object(
            "endpoint.recovered",
            {"endpointId": _id("we", "the endpoint"), "url": _str("its URL")},
            ["endpointId", "url"],
        ),
    ),
    EventKind(
        "delivery.exhausted",
        "A delivery gave up: its last retry failed (or its endpoint answered 410 Gone); the event can be "
        "recovered after the endpoint is re-enabled.",
        ("failed",),
        (WEBHOOKD,),
        ACCOUNT_READ,
        _object(
            "delivery.exhausted",
            {
                "endpointId": _id("we", "the endpoint it was for"),
                "delivery": _id("msg", "the delivery"),
                "event": _id("evt", "the event it carried"),
                "attempts": _int("attempts made", minimum=1),
                "error": _str("what the last attempt got"),
            },
            ["endpointId", "delivery", "event", "attempts", "error"],
        ),
    ),
)

TEST_KIND = EventKind(
    "webhook.test",
    "A test send to one endpoint (POST /v1/webhooks/endpoints/{id}/test); never published, never streamed.",
    ("test",),
    (WEBHOOKD,),
    ACCOUNT_READ,
    _object(
        "webhook.test",
        {"endpointId": _id("we", "the endpoint under test"), "message": _str("a fixed sentence")},
        ["endpointId", "message"],
    ),
    subscribable=False,
    sandbox=False,
)

KINDS: dict[str, EventKind] = {k.kind: k for k in _KINDS}  # in the catalog's order
EVENT_KINDS: tuple[str, ...] = tuple(KINDS)
MODE_ONLY: dict[str, str] = {k.kind: k.mode for k in _KINDS if k.mode}
# The usual ``state`` of each kind (the one the sandbox sends, and a publish that gives none gets).
STATES: dict[str, str] = {k.kind: k.state for k in _KINDS}
# Every certificate identity some kind names as its publisher.
PUBLISHERS: tuple[str, ...] = tuple(dict.fromkeys(p for k in (*_KINDS, TEST_KIND) for p in k.publishers))


def kind_of(kind: str) -> EventKind:
    """The catalog entry of ``kind`` (the test kind included); KeyError for an unknown one."""
    if kind == TEST_KIND.kind:
        return TEST_KIND
    return KINDS[kind]


def schema(kind: str) -> dict[str, Any]:
    """A copy of the JSON Schema of ``kind``'s ``data``."""
    return copy.deepcopy(dict(kind_of(kind).schema))


def envelope_schema(kind: str) -> dict[str, Any]:
    """JSON Schema of a whole delivered envelope of ``kind`` (its ``data`` by the kind's schema)."""
    entry = kind_of(kind)
    data = schema(kind)
    data.pop("$schema", None)
    return {
        "$schema": SCHEMA_DIALECT,
        "title": f"{kind} event",
        "type": "object",
        "properties": {
            "id": _id("evt", "the event, unique: deduplicate on it"),
            "type": {"const": kind},
            "created": _timestamp("when the event happened"),
            "livemode": {"type": "boolean"},
            "account": _id("acct", "the account"),
            "state": {"enum": list(entry.states)},
            "data": data,
        },
        "required": ["id", "type", "created", "livemode", "account", "state", "data"],
        "additionalProperties": False,
    }
