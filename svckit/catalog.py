"""The event catalog: every event kind (spec.md section 6) with what it means, the ``state`` its envelope
carries, the JSON Schema (draft 2020-12) of its ``data`` and one example. It is the single source of the
kinds: ``svckit.events.EVENT_KINDS`` and ``MODE_ONLY`` are derived from it, live publishers (authsvc's
outbox, webhookd's test send) build their ``data`` with the functions below, and the sandbox's samples,
trigger warnings and simulator (edge.samples, edge.simulator) use the same functions, so a sandbox event
is shaped exactly like a live one. docs/events.md is generated from it (scripts/gen_event_docs.py).

Field names in ``data`` are camelCase (as in every JSON body of the API: ``requestId``, ``docUrl``).
Timestamps are RFC 3339 UTC with millisecond precision (``2026-03-14T09:30:00.000Z``, like the
envelope's ``created``), dates ``YYYY-MM-DD``, amounts integers in minor units of ``currency``.

Standard library only: ``svc`` (the partners' CLI) imports this through svckit.events.
"""

from __future__ import annotations

import copy
import datetime as dt
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from svckit.quota import THRESHOLD_PERCENT, threshold_of

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


@dataclass(frozen=True)
class EventKind:
    kind: str
    description: str  # when it fires (one line)
    states: tuple[
        str, ...
    ]  # the envelope's ``state``: the subject's state after the event; the first is usual
    publisher: str  # who publishes it live
    schema: Mapping[str, Any]  # JSON Schema of ``data``
    mode: str = ""  # "A" or "B" when the kind exists for accounts of that commercial mode only
    subscribable: bool = True  # webhook.test is sent by a test send only, never published

    @property
    def state(self) -> str:
        return self.states[0]


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
    "product": {"enum": ["hotels", "flights", "esim"], "description": "the product"},
    "offer": _id("off", "the booked offer (a booking)"),
    "plan": _id("plan", "the eSIM plan (an order)"),
    "amount": AMOUNT,
    "currency": CURRENCY,
    "customerRef": CUSTOMER_REF,
}
# The subject of a booking or payment event: a booking (hotels, flights) or an eSIM order.
BOOKING_SUBJECT = {
    "required": ["booking", "offer"],
    "properties": {"product": {"enum": ["hotels", "flights"]}},
    "not": {"anyOf": [{"required": ["order"]}, {"required": ["plan"]}]},
}
ORDER_SUBJECT = {
    "required": ["order", "plan"],
    "properties": {"product": {"const": "esim"}},
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
        props["product"] = {"enum": ["hotels", "flights"], "description": "the product"}
    else:
        drop, first = ("booking", "offer"), ["order", "plan"]
        props["product"] = {"const": "esim", "description": "the product"}
    return _object(kind, props, [*first, *SUBJECT_REQUIRED, *required], one_of, drop)


PAYMENT = _id("pay", "the traveller's payment")
HOLD = _id("hold", "the hold on the partner's credit (mode A)")
REASON = "machine-readable cause"

# -- the catalog --------------------------------------------------------------------------------------------
_KINDS: tuple[EventKind, ...] = (
    EventKind(
        "booking.confirmed",
        "The supplier confirmed a booking: it is final and (mode A) held on credit or (mode B) paid.",
        ("confirmed",),
        "product services; the sandbox simulator",
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
    ),
    EventKind(
        "booking.failed",
        "A booking (or eSIM order) could not be completed; nothing is charged.",
        ("failed",),
        "product services; the sandbox simulator",
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
    ),
    EventKind(
        "booking.cancelled",
        "A confirmed booking was cancelled.",
        ("cancelled",),
        "product services; the sandbox simulator",
        _booking(
            "booking.cancelled",
            {"cancelledBy": _str("who cancelled: `partner` or `supplier`", enum=["partner", "supplier"])},
            ["cancelledBy"],
            subjects="booking",
        ),
    ),
    EventKind(
        "booking.modified",
        "A confirmed booking was changed; it stays confirmed.",
        ("confirmed",),
        "product services; the sandbox simulator",
        _booking(
            "booking.modified",
            {"changes": {"type": "object", "minProperties": 1, "description": "the fields changed, as sent"}},
            ["changes"],
            subjects="booking",
        ),
    ),
    EventKind(
        "payment.succeeded",
        "The traveller's payment for a booking or order was captured (mode B).",
        ("succeeded",),
        "product services; the sandbox simulator",
        _booking("payment.succeeded", {"payment": PAYMENT}, ["payment"]),
        mode="B",
    ),
    EventKind(
        "payment.failed",
        "The traveller's payment was declined (mode B); the booking fails next.",
        ("failed",),
        "product services; the sandbox simulator",
        _booking(
            "payment.failed",
            {"payment": PAYMENT, "reason": _str(f"{REASON}, e.g. `card_declined`", minLength=1)},
            ["payment", "reason"],
        ),
        mode="B",
    ),
    EventKind(
        "payment.refunded",
        "The traveller's payment was refunded, after a cancellation (mode B).",
        ("refunded",),
        "product services; the sandbox simulator",
        _booking(
            "payment.refunded", {"payment": PAYMENT, "refund": _id("re", "the refund")}, ["payment", "refund"]
        ),
        mode="B",
    ),
    EventKind(
        "esim.provisioned",
        "An eSIM order is ready: the traveller can install the eSIM.",
        ("provisioned",),
        "product services; the sandbox simulator",
        _booking(
            "esim.provisioned",
            {
                "iccid": _str("the eSIM's ICCID", pattern="^[0-9]{18,22}$"),
                "activationCode": _str("the LPA activation code (for a QR code)", pattern="^LPA:"),
            },
            ["iccid", "activationCode"],
            subjects="order",
        ),
    ),
    EventKind(
        "esim.usage_threshold",
        "An active eSIM has used a share of its plan's data allowance.",
        ("active",),
        "product services; the sandbox",
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
    ),
    EventKind(
        "ledger.low_balance",
        "The partner's credit fell below its warning level (mode A).",
        ("low_balance",),
        "the ledger; the sandbox (`credit_exhausted` trigger)",
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
        "authsvc; the sandbox (`search_quota_exhausted` trigger)",
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
        "billing; the sandbox",
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
        "billing; the sandbox",
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
        "authsvc",
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
)

TEST_KIND = EventKind(
    "webhook.test",
    "A test send to one endpoint (POST /v1/webhooks/endpoints/{id}/test); never published, never streamed.",
    ("test",),
    "webhookd",
    _object(
        "webhook.test",
        {"endpointId": _id("we", "the endpoint under test"), "message": _str("a fixed sentence")},
        ["endpointId", "message"],
    ),
    subscribable=False,
)

KINDS: dict[str, EventKind] = {k.kind: k for k in _KINDS}
EVENT_KINDS: tuple[str, ...] = tuple(KINDS)
MODE_ONLY: dict[str, str] = {k.kind: k.mode for k in _KINDS if k.mode}
# The usual ``state`` of each kind (the one the sandbox sends).
STATES: dict[str, str] = {k.kind: k.state for k in _KINDS}


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


# -- data builders: the one place each kind's data is written, live and sandbox ----------------------------
def timestamp(when: dt.datetime) -> str:
    """RFC 3339 UTC with milliseconds, as the envelope's ``created``."""
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


SAMPLE_BOOKING: dict[str, Any] = {
    "booking": "bk_test_3f9a1c7e52d0",
    "product": "hotels",
    "offer": "off_hotels_1",
    "amount": 25800,
    "currency": "EUR",
    "customerRef": "cust-1042",
}
SAMPLE_ORDER: dict[str, Any] = {
    "order": "ord_test_8b2e4d6a1f03",
    "product": "esim",
    "plan": "plan_eu_5gb",
    "amount": 1900,
    "currency": "EUR",
    "customerRef": "cust-1042",
}
LOW_BALANCE_WARNING = 10_000  # minor units: the sandbox's low-balance warning level
SAMPLE_DATA_BYTES = 5 * 1024**3  # the sample eSIM plan's allowance
TEST_MESSAGE = "This is a test delivery from the webhook service."


def suffix(subject_id: str) -> str:
    """A stable short token derived from the subject's id, for the ids that hang off it."""
    return hashlib.sha256(subject_id.encode()).hexdigest()[:12]


def event_data(
    kind: str, subject: Mapping[str, Any], mode: str, extra: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """``data`` of a booking, payment or eSIM event about ``subject`` (a booking or an eSIM order: its
    public fields), for an account of ``mode``; ``extra`` overrides (e.g. a modification's ``changes``)."""
    sid = str(subject.get("booking") or subject.get("order") or "")
    tok = suffix(sid)
    data = dict(subject)
    if kind == "booking.confirmed":
        data["supplierReference"] = "SBX-" + tok[:8].upper()
        if mode == "B":
            data["payment"] = f"pay_test_{tok}"
        else:
            data["hold"] = f"hold_test_{tok}"
    elif kind == "booking.failed":
        data["reason"] = "supplier_declined"
        data["message"] = "The supplier could not confirm the booking."
        data["holdReleased"] = mode != "B"
    elif kind == "booking.cancelled":
        data["cancelledBy"] = "partner"
    elif kind == "booking.modified":
        data["changes"] = {"guests": 3}
    elif kind.startswith("payment."):
        data["payment"] = f"pay_test_{tok}"
        if kind == "payment.failed":
            data["reason"] = "card_declined"
        elif kind == "payment.refunded":
            data["refund"] = f"re_test_{tok}"
    elif kind == "esim.provisioned":
        data["iccid"] = "89000" + str(int(tok, 16))[:14].rjust(14, "0")
        data["activationCode"] = f"LPA:1$sandbox.esim.example${tok.upper()}"
    elif kind == "esim.usage_threshold":
        data["thresholdPercent"] = 80
        data["usedBytes"] = SAMPLE_DATA_BYTES * 8 // 10
        data["limitBytes"] = SAMPLE_DATA_BYTES
    data.update(extra or {})
    return data


def low_balance(
    currency: str = "EUR", amount: int = 4_500, warning_level: int = LOW_BALANCE_WARNING
) -> dict[str, Any]:
    """``data`` of ledger.low_balance."""
    return {"amount": amount, "currency": currency, "warningLevel": warning_level}


def quota_threshold(allowance: int, day: dt.date | str, used: int | None = None) -> dict[str, Any]:
    """``data`` of search_quota.threshold on ``day`` (UTC) for ``allowance``: authsvc sends it with the
    count that crossed the threshold as ``used``; the sandbox without, i.e. exactly at the threshold."""
    allowance = max(allowance, 1)
    if used is None:
        used = threshold_of(allowance)
    return {
        "date": day if isinstance(day, str) else day.isoformat(),
        "searchesUsed": used,
        "dailySearchAllowance": allowance,
        "remaining": max(0, allowance - used),
        "thresholdPercent": THRESHOLD_PERCENT,
    }


def apikey_revoked(
    key_id: str, hint: str, name: str, revoked_at: dt.datetime, revoked_by: str, reason: str
) -> dict[str, Any]:
    """``data`` of apikey.revoked."""
    return {
        "keyId": key_id,
        "hint": hint,
        "name": name,
        "revokedAt": timestamp(revoked_at),
        "revokedBy": revoked_by,
        "reason": reason,
    }


def settlement(kind: str, now: dt.datetime) -> dict[str, Any]:
    """``data`` of the sample settlement.* event: last month's period."""
    first = now.date().replace(day=1)
    period_end = first - dt.timedelta(days=1)
    data: dict[str, Any] = {
        "invoice": "inv_test_5c1d9e2b7a40",
        "settlement": "stl_test_0e7f3b9d2c61",
        "amount": 1_250_000,
        "currency": "EUR",
        "periodStart": period_end.replace(day=1).isoformat(),
        "periodEnd": period_end.isoformat(),
    }
    if kind == "settlement.invoice_issued":
        data["dueDate"] = (first + dt.timedelta(days=14)).isoformat()
    else:
        data["reason"] = "insufficient_funds"
        data["readOnlyAfter"] = (now.date() + dt.timedelta(days=7)).isoformat()
    return data


def webhook_test(endpoint_id: str) -> dict[str, Any]:
    """``data`` of webhook.test (webhookd's SendTestEvent)."""
    return {"endpointId": endpoint_id, "message": TEST_MESSAGE}


def sample(kind: str, mode: str, now: dt.datetime, allowance: int = 1000) -> tuple[str, dict[str, Any]]:
    """(state, data) of the sample event of ``kind`` for an account of ``mode`` ("A" or "B")."""
    if kind.startswith("booking.") or kind.startswith("payment."):
        data = event_data(kind, SAMPLE_BOOKING, mode)
    elif kind.startswith("esim."):
        data = event_data(kind, SAMPLE_ORDER, mode)
    elif kind == "ledger.low_balance":
        data = low_balance()
    elif kind == "search_quota.threshold":
        data = quota_threshold(allowance, now.astimezone(dt.UTC).date())
    elif kind.startswith("settlement."):
        data = settlement(kind, now)
    elif kind == "apikey.revoked":
        data = apikey_revoked(
            "key_test_sample0000000000",
            "svc_test_...abcd",
            "sample key",
            now,
            "portal:admin@partner.example",
            "sample event",
        )
    elif kind == TEST_KIND.kind:
        data = webhook_test("we_test_sample0000000000")
    else:
        raise KeyError(kind)
    return kind_of(kind).state, data


# -- the whole catalog, as data ----------------------------------------------------------------------------
EXAMPLE_NOW = dt.datetime(2026, 3, 14, 9, 30, tzinfo=dt.UTC)


def example_mode(kind: str) -> str:
    """The commercial mode an example is shown for: the kind's own, else A."""
    return kind_of(kind).mode or "A"


def example(kind: str) -> dict[str, Any]:
    """The example ``data`` of ``kind``: its sandbox sample at a fixed time, for an account of its mode."""
    return sample(kind, example_mode(kind), EXAMPLE_NOW)[1]


def catalog(include_test: bool = True) -> list[dict[str, Any]]:
    """The whole catalog as JSON-able data, one entry per kind in catalog order (webhook.test last when
    ``include_test``): kind, description, states, mode (null for both), subscribable, publisher, schema
    (of ``data``) and example (``data``)."""
    entries = [*_KINDS, *((TEST_KIND,) if include_test else ())]
    return [
        {
            "kind": k.kind,
            "description": k.description,
            "states": list(k.states),
            "mode": k.mode or None,
            "subscribable": k.subscribable,
            "publisher": k.publisher,
            "schema": schema(k.kind),
            "example": example(k.kind),
        }
        for k in entries
    ]


def example_envelope(kind: str) -> dict[str, Any]:
    """A whole sandbox envelope of ``kind`` around its example, as delivered (for docs/events.md)."""
    return {
        "id": "evt_4bq2LrD2JrC8H1nQmC1x8ZyA",
        "type": kind,
        "created": timestamp(EXAMPLE_NOW),
        "livemode": False,
        "account": "acct_7Hq3ZkM9pT2wX5rB8nC1dF4g",
        "state": kind_of(kind).state,
        "data": example(kind),
    }
