"""Event payloads of the sandbox: the sample of every event kind (POST /v1/sandbox/events) and the data the
built-in simulator's booking lifecycle publishes. Pure.

Field names are the same across kinds: ``booking`` / ``order`` (the subject's id), ``product``,
``amount`` in minor units with ``currency``, ``customerRef`` when the partner sent one. apikey.revoked
keeps the shape authsvc gives the real event. docs/webhooks.md shows one example of each.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Mapping
from typing import Any

from svckit.events import EVENT_KINDS

# The ``state`` of the envelope: the state of the subject after the event.
STATES: dict[str, str] = {
    "booking.confirmed": "confirmed",
    "booking.failed": "failed",
    "booking.cancelled": "cancelled",
    "booking.modified": "confirmed",
    "payment.succeeded": "succeeded",
    "payment.failed": "failed",
    "payment.refunded": "refunded",
    "esim.provisioned": "provisioned",
    "esim.usage_threshold": "active",
    "ledger.low_balance": "low",
    "search_quota.threshold": "near_limit",
    "settlement.invoice_issued": "issued",
    "settlement.payment_failed": "failed",
    "apikey.revoked": "revoked",
}
assert set(STATES) == set(EVENT_KINDS)

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


def suffix(subject_id: str) -> str:
    """A stable short token derived from the subject's id, for the ids that hang off it."""
    return hashlib.sha256(subject_id.encode()).hexdigest()[:12]


def _subject_id(subject: Mapping[str, Any]) -> str:
    return str(subject.get("booking") or subject.get("order") or "")


def event_data(
    kind: str, subject: Mapping[str, Any], mode: str, extra: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """``data`` of a booking, payment or eSIM event about ``subject`` (a booking or an eSIM order)."""
    sid = _subject_id(subject)
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


def low_balance(currency: str = "EUR") -> dict[str, Any]:
    return {"amount": 4_500, "currency": currency, "warningLevel": LOW_BALANCE_WARNING}


def quota_threshold(allowance: int, today: dt.date) -> dict[str, Any]:
    allowance = max(allowance, 1)
    used = -(-allowance * 9 // 10)
    return {
        "date": today.isoformat(),
        "dailySearchAllowance": allowance,
        "searchesUsed": used,
        "remaining": allowance - used,
        "thresholdPercent": 90,
    }


def sample(kind: str, mode: str, now: dt.datetime, allowance: int = 1000) -> tuple[str, dict[str, Any]]:
    """(state, data) of the sample event of ``kind`` for an account of ``mode`` ("A" or "B")."""
    if kind.startswith("booking.") or kind.startswith("payment."):
        data = event_data(kind, SAMPLE_BOOKING, mode)
    elif kind.startswith("esim."):
        data = event_data(kind, SAMPLE_ORDER, mode)
    elif kind == "ledger.low_balance":
        data = low_balance()
    elif kind == "search_quota.threshold":
        data = quota_threshold(allowance, now.date())
    elif kind.startswith("settlement."):
        first = now.date().replace(day=1)
        period_end = first - dt.timedelta(days=1)
        data = {
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
    elif kind == "apikey.revoked":
        data = {
            "key_id": "key_test_sample0000000000",
            "hint": "svc_test_...abcd",
            "name": "sample key",
            "revoked_at": now.astimezone(dt.UTC).isoformat(),
            "revoked_by": "portal:admin@partner.example",
            "reason": "sample event",
        }
    else:
        raise KeyError(kind)
    return STATES[kind], data
