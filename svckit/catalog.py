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

import datetime as dt
import hashlib
from collections.abc import Mapping
from typing import Any

from svckit import accountkinds
from svckit.eventkinds import (
    BY_PRODUCT,
    EVENT_KINDS,
    KINDS,
    MODE_ONLY,
    PRODUCT_PREFIX,
    PUBLISHERS,
    SANDBOX_PUBLISHER,
    STATES,
    TEST_KIND,
    EventKind,
    envelope_schema,
    kind_of,
    product_service,
    schema,
)
from svckit.eventschemas import SCHEMA_DIALECT, sample_of
from svckit.quota import THRESHOLD_PERCENT, threshold_of
from svckit.thinevents import thin_schema


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


def apikey_leaked(
    key_id: str, hint: str, name: str, url: str, source: str, reporter: str, revoked_at: dt.datetime
) -> dict[str, Any]:
    """``data`` of apikey.leaked."""
    return {
        "keyId": key_id,
        "hint": hint,
        "name": name,
        "url": url,
        "source": source,
        "reporter": reporter,
        "revokedAt": timestamp(revoked_at),
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


def endpoint_failing(endpoint_id: str, url: str, percent: int, attempts: int, error: str) -> dict[str, Any]:
    """``data`` of endpoint.failing."""
    return {
        "endpointId": endpoint_id,
        "url": url,
        "thresholdPercent": percent,
        "attemptsFailed": attempts,
        "error": error,
    }


def endpoint_disabled(endpoint_id: str, url: str, reason: str, at: dt.datetime) -> dict[str, Any]:
    """``data`` of endpoint.disabled."""
    return {"endpointId": endpoint_id, "url": url, "reason": reason, "disabledAt": timestamp(at)}


def endpoint_recovered(endpoint_id: str, url: str) -> dict[str, Any]:
    """``data`` of endpoint.recovered."""
    return {"endpointId": endpoint_id, "url": url}


def delivery_exhausted(
    endpoint_id: str, delivery_id: str, event_id: str, attempts: int, error: str
) -> dict[str, Any]:
    """``data`` of delivery.exhausted."""
    return {
        "endpointId": endpoint_id,
        "delivery": delivery_id,
        "event": event_id,
        "attempts": attempts,
        "error": error,
    }


SAMPLE_ENDPOINT = ("we_test_sample0000000000", "https://hooks.partner.example/webhooks")
SAMPLE_ERROR = "endpoint answered HTTP 503"


def sample(kind: str, mode: str, now: dt.datetime, allowance: int = 1000) -> tuple[str, dict[str, Any]]:
    """(state, data) of the sample event of ``kind`` for an account of ``mode`` ("A" or "B"); KeyError for
    a kind the catalog does not have."""
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
    elif kind in (accountkinds.LOOK_TO_BOOK, accountkinds.ANOMALY):
        data = accountkinds.sample(kind, now)
    elif kind == "apikey.revoked":
        data = apikey_revoked(
            "key_test_sample0000000000",
            "svc_test_...abcd",
            "sample key",
            now,
            "portal:admin@partner.example",
            "sample event",
        )
    elif kind == "apikey.leaked":
        data = apikey_leaked(
            "key_test_sample0000000000",
            "svc_test_...abcd",
            "sample key",
            "https://github.com/partner/app/blob/0000000/config.py",
            "content",
            "GitHub secret scanning",
            now,
        )
    elif kind == TEST_KIND.kind:
        data = webhook_test("we_test_sample0000000000")
    elif kind == "endpoint.failing":
        data = endpoint_failing(*SAMPLE_ENDPOINT, 50, 4, SAMPLE_ERROR)
    elif kind == "endpoint.disabled":
        data = endpoint_disabled(*SAMPLE_ENDPOINT, f"the last of 7 attempts failed: {SAMPLE_ERROR}", now)
    elif kind == "endpoint.recovered":
        data = endpoint_recovered(*SAMPLE_ENDPOINT)
    elif kind == "delivery.exhausted":
        data = delivery_exhausted(
            SAMPLE_ENDPOINT[0], "msg_test_sample000000000", "evt_test_sample000000000", 7, SAMPLE_ERROR
        )
    else:
        # A kind with no builder above: its schema's required fields, each with a value the schema
        # admits (svckit.eventschemas.sample_of), so a new kind needs only its catalog entry.
        data = sample_of(kind_of(kind).schema)
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
    ``include_test``): kind, description, states, mode (null for both), subscribable, publishers (the
    certificate identities), sandbox (whether the sandbox sends it), publisher (the same, for a person),
    reader (the scope that reads one event, ``<product>:read`` meaning its own product's) and readers
    (every scope that reads some event of the kind), schema (of ``data``), example (``data``),
    references (the ``data`` fields a thin delivery keeps) and thinSchema (of a whole thin envelope,
    svckit.thinevents)."""
    entries = [*KINDS.values(), *((TEST_KIND,) if include_test else ())]
    return [
        {
            "kind": k.kind,
            "description": k.description,
            "states": list(k.states),
            "mode": k.mode or None,
            "subscribable": k.subscribable,
            "publishers": list(k.publishers),
            "sandbox": k.sandbox,
            "publisher": k.publisher,
            "reader": k.reader,
            "readers": list(k.readers),
            "schema": schema(k.kind),
            "example": example(k.kind),
            "references": list(k.references),
            "thinSchema": thin_schema(k.kind),
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


__all__ = [
    "BY_PRODUCT",
    "EVENT_KINDS",
    "EXAMPLE_NOW",
    "KINDS",
    "LOW_BALANCE_WARNING",
    "MODE_ONLY",
    "PRODUCT_PREFIX",
    "PUBLISHERS",
    "SAMPLE_BOOKING",
    "SAMPLE_DATA_BYTES",
    "SAMPLE_ORDER",
    "SANDBOX_PUBLISHER",
    "SCHEMA_DIALECT",
    "STATES",
    "TEST_KIND",
    "TEST_MESSAGE",
    "EventKind",
    "apikey_leaked",
    "apikey_revoked",
    "catalog",
    "delivery_exhausted",
    "endpoint_disabled",
    "endpoint_failing",
    "endpoint_recovered",
    "envelope_schema",
    "event_data",
    "example",
    "example_envelope",
    "example_mode",
    "kind_of",
    "low_balance",
    "product_service",
    "quota_threshold",
    "sample",
    "schema",
    "settlement",
    "suffix",
    "timestamp",
    "webhook_test",
]
