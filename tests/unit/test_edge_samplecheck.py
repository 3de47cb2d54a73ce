"""The sandbox sample's data check (edge.samplecheck), by table: what POST /v1/sandbox/events may merge
over a sample, and the message naming what it may not."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from edge.samplecheck import kind_fields, refusal
from edge.samples import sample
from svckit.catalog import schema
from svckit.events import EVENT_KINDS, mode_refusal

NOW = dt.datetime(2026, 3, 14, 9, 30, tzinfo=dt.UTC)


def _sample(kind: str, mode: str = "A") -> dict[str, Any]:
    return sample(kind, mode, NOW, 1000)[1]


@pytest.mark.parametrize(
    ("kind", "mode", "sent", "says"),
    [
        # Accepted: the sample's own fields, with values the schema admits.
        ("booking.cancelled", "A", {}, ""),
        ("booking.cancelled", "A", {"customerRef": "my-own-ref"}, ""),
        ("booking.cancelled", "A", {"booking": "bk_mine_1", "amount": 0, "cancelledBy": "supplier"}, ""),
        ("search_quota.threshold", "A", {"date": "2026-02-28", "remaining": 0}, ""),
        ("booking.modified", "A", {"changes": {"guests": 3}}, ""),
        ("payment.succeeded", "B", {"payment": "pay_mine"}, ""),
        # A field the kind does not have.
        ("booking.confirmed", "A", {"madeUp": 1}, "data.madeUp: not a field of booking.confirmed events"),
        ("booking.confirmed", "A", {"order": "ord_1"}, "data.order: not a field of booking.confirmed"),
        (
            "ledger.low_balance",
            "A",
            {"customerRef": "x"},
            "data.customerRef: not a field of ledger.low_balance",
        ),
        # A value the kind's schema refuses.
        (
            "booking.cancelled",
            "A",
            {"amount": -5},
            "data.amount: -5 is not valid for a booking.cancelled event",
        ),
        ("booking.cancelled", "A", {"amount": "5"}, "data.amount: '5' is not valid"),
        ("booking.cancelled", "A", {"cancelledBy": "nobody"}, "data.cancelledBy: 'nobody'"),
        ("booking.cancelled", "A", {"booking": "BK-1"}, "data.booking: 'BK-1'"),
        ("booking.cancelled", "A", {"currency": "eur"}, "data.currency: 'eur'"),
        ("search_quota.threshold", "A", {"date": "2026-02-30"}, "data.date: '2026-02-30'"),
        ("search_quota.threshold", "A", {"thresholdPercent": 50}, "data.thresholdPercent: 50"),
        ("booking.modified", "A", {"changes": {}}, "data.changes: {}"),
        ("booking.cancelled", "A", {"customerRef": None}, "data.customerRef: None"),
        # Fields that together break a rule across fields.
        ("booking.failed", "A", {"order": "ord_1"}, "data (order): these fields do not make a valid"),
        ("booking.confirmed", "A", {"payment": "pay_1"}, "data (payment): these fields do not make a valid"),
    ],
)
def test_refusal(kind: str, mode: str, sent: dict[str, Any], says: str) -> None:
    got = refusal(kind, _sample(kind, mode), sent)
    assert got.startswith(says) if says else got == "", got
    if says:
        assert kind in got


def test_a_long_value_is_cut_in_the_message() -> None:
    got = refusal("booking.cancelled", _sample("booking.cancelled"), {"amount": "x" * 10_000})
    assert got.startswith("data.amount: 'xxx") and len(got) < 300


@pytest.mark.parametrize("kind", EVENT_KINDS)
def test_every_sample_passes_unchanged_and_with_its_own_fields_sent_back(kind: str) -> None:
    mode = "B" if not mode_refusal(kind, "B") else "A"
    data = _sample(kind, mode)
    assert refusal(kind, data, {}) == ""
    assert refusal(kind, data, dict(data)) == ""
    assert set(data) <= set(kind_fields(kind)) == set(schema(kind)["properties"])
