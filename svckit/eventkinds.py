"""The event kinds of the catalog (``svckit.catalog``): for each, what it means, the ``state`` its envelope
carries, and the JSON Schema (draft 2020-12) of its ``data``. Standard library only.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from svckit.accountkinds import ANOMALY, ANOMALY_SCHEMA, LOOK_TO_BOOK, LOOK_TO_BOOK_SCHEMA
from svckit.eventschemas import (
    AMOUNT,
    CURRENCY,
    HOLD,
    PAYMENT,
    REASON,
    SCHEMA_DIALECT,
    booking_schema,
    date_field,
    id_field,
    int_field,
    object_schema,
    string_field,
    timestamp_field,
)
from svckit.quota import THRESHOLD_PERCENT
from svckit.resources import BOOKING_PRODUCTS, ORDER_PRODUCTS

# Where an endpoint's deliveries go, as its operational events name it (never a credential).
ENDPOINT_TARGET = (
    "its URL; for a broker endpoint where it publishes (`amqp://host:port/vhost exchange/routing-key`, "
    "or the NATS servers and subject), `polling` for a polling endpoint"
)


# -- who publishes a kind, who reads it ----------------------------------------------------------------------
# Publishers are the certificate identities of the services (svckit.peers) that own what a kind reports.
# A product service is ``product:<name>``; it publishes only events about its own product
# (``data.product``), so a hotels certificate cannot announce a flight or an eSIM.
AUTHSVC, WEBHOOKD, BILLING = "authsvc", "webhookd", "billing"
PRODUCT_PREFIX = "product:"
# The sandbox's events (samples, trigger warnings, the simulator) are the edge's, and sandbox ones only.
SANDBOX_PUBLISHER = "edge"
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
    # The ``data`` fields a thin delivery keeps (svckit.thinevents): the ids of the resources the event is
    # about and the product; never a person's data, an amount or a free text.
    references: tuple[str, ...] = ()

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


# Ordering keys: the booking, the eSIM order, or whichever of the two the event is about.
BY_BOOKING, BY_ORDER, BY_SUBJECT = ("booking",), ("order",), ("booking", "order")
# Thin payloads' references of a booking's kinds, an eSIM order's, and of a kind about either.
BOOKING_REFS = ("booking", "offer", "product")
ORDER_REFS = ("order", "plan", "product")
SUBJECT_REFS = ("booking", "order", "offer", "plan", "product")

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
        booking_schema(
            "booking.confirmed",
            {
                "supplierReference": string_field("the supplier's reference of the booking", minLength=1),
                "hold": HOLD,
                "payment": id_field("pay", "the traveller's payment (mode B)"),
            },
            ["supplierReference"],
            subjects="booking",
            one_of=[{"required": ["hold"]}, {"required": ["payment"]}],
        ),
        ordering=BY_BOOKING,
        references=(*BOOKING_REFS, "hold", "payment"),
    ),
    EventKind(
        "booking.failed",
        "A booking (or eSIM order) could not be completed; nothing is charged.",
        ("failed",),
        SUBJECT_PUBLISHERS,
        BY_PRODUCT,
        booking_schema(
            "booking.failed",
            {
                "reason": string_field(f"{REASON}, e.g. `supplier_declined`", minLength=1),
                "message": string_field("what happened, for a person"),
                "holdReleased": {
                    "type": "boolean",
                    "description": "whether a hold on the partner's credit was released (mode A)",
                },
            },
            ["reason", "message", "holdReleased"],
        ),
        ordering=BY_SUBJECT,
        references=SUBJECT_REFS,
    ),
    EventKind(
        "booking.cancelled",
        "A confirmed booking was cancelled.",
        ("cancelled",),
        BOOKING_PUBLISHERS,
        BY_PRODUCT,
        booking_schema(
            "booking.cancelled",
            {
                "cancelledBy": string_field(
                    "who cancelled: `partner` or `supplier`", enum=["partner", "supplier"]
                )
            },
            ["cancelledBy"],
            subjects="booking",
        ),
        ordering=BY_BOOKING,
        references=BOOKING_REFS,
    ),
    EventKind(
        "booking.modified",
        "A confirmed booking was changed; it stays confirmed.",
        ("confirmed",),
        BOOKING_PUBLISHERS,
        BY_PRODUCT,
        booking_schema(
            "booking.modified",
            {"changes": {"type": "object", "minProperties": 1, "description": "the fields changed, as sent"}},
            ["changes"],
            subjects="booking",
        ),
        ordering=BY_BOOKING,
        references=BOOKING_REFS,
    ),
    EventKind(
        "payment.succeeded",
        "The traveller's payment for a booking or order was captured (mode B).",
        ("succeeded",),
        SUBJECT_PUBLISHERS,
        BY_PRODUCT,
        booking_schema("payment.succeeded", {"payment": PAYMENT}, ["payment"]),
        mode="B",
        ordering=BY_SUBJECT,
        references=(*SUBJECT_REFS, "payment"),
    ),
    EventKind(
        "payment.failed",
        "The traveller's payment was declined (mode B); the booking fails next.",
        ("failed",),
        SUBJECT_PUBLISHERS,
        BY_PRODUCT,
        booking_schema(
            "payment.failed",
            {"payment": PAYMENT, "reason": string_field(f"{REASON}, e.g. `card_declined`", minLength=1)},
            ["payment", "reason"],
        ),
        mode="B",
        ordering=BY_SUBJECT,
        references=(*SUBJECT_REFS, "payment"),
    ),
    EventKind(
        "payment.refunded",
        "The traveller's payment was refunded, after a cancellation (mode B).",
        ("refunded",),
        SUBJECT_PUBLISHERS,
        BY_PRODUCT,
        booking_schema(
            "payment.refunded",
            {"payment": PAYMENT, "refund": id_field("re", "the refund")},
            ["payment", "refund"],
        ),
        mode="B",
        ordering=BY_SUBJECT,
        references=(*SUBJECT_REFS, "payment", "refund"),
    ),
    EventKind(
        "esim.provisioned",
        "An eSIM order is ready: the traveller can install the eSIM.",
        ("provisioned",),
        ORDER_PUBLISHERS,
        ESIM_READ,
        booking_schema(
            "esim.provisioned",
            {
                "iccid": string_field("the eSIM's ICCID", pattern="^[0-9]{18,22}$"),
                "activationCode": string_field("the LPA activation code (for a QR code)", pattern="^LPA:"),
            },
            ["iccid", "activationCode"],
            subjects="order",
        ),
        ordering=BY_ORDER,
        references=ORDER_REFS,
    ),
    EventKind(
        "esim.usage_threshold",
        "An active eSIM has used a share of its plan's data allowance.",
        ("active",),
        ORDER_PUBLISHERS,
        ESIM_READ,
        booking_schema(
            "esim.usage_threshold",
            {
                "thresholdPercent": int_field(
                    "the share of the allowance reached, in percent", minimum=1, maximum=100
                ),
                "usedBytes": int_field("data used so far", minimum=0),
                "limitBytes": int_field("the plan's data allowance", minimum=0),
            },
            ["thresholdPercent", "usedBytes", "limitBytes"],
            subjects="order",
        ),
        ordering=BY_ORDER,
        references=ORDER_REFS,
    ),
    EventKind(
        "ledger.low_balance",
        "The partner's credit fell below its warning level (mode A).",
        ("low_balance",),
        (AUTHSVC,),
        ACCOUNT_READ,
        object_schema(
            "ledger.low_balance",
            {
                "amount": int_field("the credit balance, in minor units of `currency`"),
                "currency": CURRENCY,
                "warningLevel": int_field(
                    "the balance under which this warning is sent, minor units", minimum=0
                ),
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
        object_schema(
            "search_quota.threshold",
            {
                "date": date_field("the UTC day counted"),
                "searchesUsed": int_field(
                    "searches counted that day, the one that crossed the threshold included", minimum=1
                ),
                "dailySearchAllowance": int_field("the account's daily search allowance", minimum=1),
                "remaining": int_field("searches left that day", minimum=0),
                "thresholdPercent": int_field(
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
        object_schema(
            "settlement.invoice_issued",
            {
                "invoice": id_field("inv", "the invoice"),
                "settlement": id_field("stl", "the settlement"),
                "amount": AMOUNT,
                "currency": CURRENCY,
                "periodStart": date_field("the period's first day"),
                "periodEnd": date_field("the period's last day"),
                "dueDate": date_field("the day the invoice is due"),
            },
            ["invoice", "settlement", "amount", "currency", "periodStart", "periodEnd", "dueDate"],
        ),
        references=("invoice", "settlement"),
    ),
    EventKind(
        "settlement.payment_failed",
        "Collecting a settlement invoice failed; the account turns read-only unless it is paid.",
        ("failed",),
        (BILLING,),
        ACCOUNT_READ,
        object_schema(
            "settlement.payment_failed",
            {
                "invoice": id_field("inv", "the invoice"),
                "settlement": id_field("stl", "the settlement"),
                "amount": AMOUNT,
                "currency": CURRENCY,
                "periodStart": date_field("the period's first day"),
                "periodEnd": date_field("the period's last day"),
                "reason": string_field(f"{REASON}, e.g. `insufficient_funds`", minLength=1),
                "readOnlyAfter": date_field("the day the account turns read-only if still unpaid"),
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
        references=("invoice", "settlement"),
    ),
    EventKind(
        "apikey.revoked",
        "An API key of the account was revoked, by anyone; it stopped working at once.",
        ("revoked",),
        (AUTHSVC,),
        ACCOUNT_READ,
        object_schema(
            "apikey.revoked",
            {
                "keyId": id_field("key", "the revoked key"),
                "hint": string_field("the key's visible hint (prefix and last characters)"),
                "name": string_field("the key's name"),
                "revokedAt": timestamp_field("when it was revoked"),
                "revokedBy": string_field("who revoked it (a portal user or an operator); may be empty"),
                "reason": string_field("the reason given; may be empty"),
            },
            ["keyId", "hint", "name", "revokedAt", "revokedBy", "reason"],
        ),
        references=("keyId",),
    ),
    EventKind(
        "apikey.leaked",
        "An API key of the account was found in public (reported by a secret scanner) and revoked at "
        "once; apikey.revoked fires too. Replace it with a new key.",
        ("revoked",),
        (AUTHSVC,),
        ACCOUNT_READ,
        object_schema(
            "apikey.leaked",
            {
                "keyId": id_field("key", "the leaked key"),
                "hint": string_field("the key's visible hint (prefix and last characters); never the secret"),
                "name": string_field("the key's name"),
                "url": string_field("where it was found in public; may be empty"),
                "source": string_field("the scanner's kind of place (e.g. content, commit); may be empty"),
                "reporter": string_field("who reported it (e.g. GitHub secret scanning)"),
                "revokedAt": timestamp_field("when it was revoked"),
            },
            ["keyId", "hint", "name", "url", "source", "reporter", "revokedAt"],
        ),
        references=("keyId",),
    ),
    # Operational events about the account's traffic (docs/operations.md "Look-to-book", "Anomaly alerts").
    EventKind(
        LOOK_TO_BOOK,
        "The account's live searches per confirmed booking over the last 7 days passed its contractual "
        "target (at most once a week while it stays past).",
        ("exceeded",),
        (AUTHSVC,),
        ACCOUNT_READ,
        LOOK_TO_BOOK_SCHEMA,
    ),
    EventKind(
        ANOMALY,
        "The account's error rate or p95 latency over the last hour jumped against its own 7-day "
        "baseline (at most once an hour per kind of anomaly).",
        ("anomalous",),
        (AUTHSVC,),
        ACCOUNT_READ,
        ANOMALY_SCHEMA,
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
        object_schema(
            "endpoint.failing",
            {
                "endpointId": id_field("we", "the failing endpoint"),
                "url": string_field(ENDPOINT_TARGET),
                "thresholdPercent": {"enum": [50, 90], "description": "how far along the road to disabling"},
                "attemptsFailed": int_field(
                    "the failed attempts of the delivery that crossed the level", minimum=1
                ),
                "error": string_field("what the last attempt got"),
            },
            ["endpointId", "url", "thresholdPercent", "attemptsFailed", "error"],
        ),
        references=("endpointId",),
    ),
    EventKind(
        "endpoint.disabled",
        "One of the account's endpoints was disabled: a delivery's last retry failed, or it answered "
        "410 Gone. Its events are kept, not sent, until it is re-enabled and recovered.",
        ("disabled",),
        (WEBHOOKD,),
        ACCOUNT_READ,
        object_schema(
            "endpoint.disabled",
            {
                "endpointId": id_field("we", "the disabled endpoint"),
                "url": string_field(ENDPOINT_TARGET),
                "reason": string_field("why it was disabled"),
                "disabledAt": timestamp_field("when"),
            },
            ["endpointId", "url", "reason", "disabledAt"],
        ),
        references=("endpointId",),
    ),
    EventKind(
        "endpoint.recovered",
        "An endpoint that was failing or disabled answered a delivery with 2xx again.",
        ("enabled",),
        (WEBHOOKD,),
        ACCOUNT_READ,
        object_schema(
            "endpoint.recovered",
            {"endpointId": id_field("we", "the endpoint"), "url": string_field(ENDPOINT_TARGET)},
            ["endpointId", "url"],
        ),
        references=("endpointId",),
    ),
    EventKind(
        "delivery.exhausted",
        "A delivery gave up: its last retry failed (or its endpoint answered 410 Gone); the event can be "
        "recovered after the endpoint is re-enabled.",
        ("failed",),
        (WEBHOOKD,),
        ACCOUNT_READ,
        object_schema(
            "delivery.exhausted",
            {
                "endpointId": id_field("we", "the endpoint it was for"),
                "delivery": id_field("msg", "the delivery"),
                "event": id_field("evt", "the event it carried"),
                "attempts": int_field("attempts made", minimum=1),
                "error": string_field("what the last attempt got"),
            },
            ["endpointId", "delivery", "event", "attempts", "error"],
        ),
        references=("endpointId", "delivery", "event"),
    ),
)

TEST_KIND = EventKind(
    "webhook.test",
    "A test send to one endpoint (POST /v1/webhooks/endpoints/{id}/test); never published, never streamed.",
    ("test",),
    (WEBHOOKD,),
    ACCOUNT_READ,
    object_schema(
        "webhook.test",
        {
            "endpointId": id_field("we", "the endpoint under test"),
            "message": string_field("a fixed sentence"),
        },
        ["endpointId", "message"],
    ),
    subscribable=False,
    sandbox=False,
    references=("endpointId",),
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
            "id": id_field("evt", "the event, unique: deduplicate on it"),
            "type": {"const": kind},
            "created": timestamp_field("when the event happened"),
            "livemode": {"type": "boolean"},
            "account": id_field("acct", "the account"),
            "state": {"enum": list(entry.states)},
            "data": data,
        },
        "required": ["id", "type", "created", "livemode", "account", "state", "data"],
        "additionalProperties": False,
    }
