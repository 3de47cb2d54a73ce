from __future__ import annotations

import datetime as dt
import json

import pytest

from webhookd import (
    EVENT_KINDS,
    MAX_PAYLOAD_BYTES,
    Environment,
    InvalidRequest,
    PayloadTooLarge,
    build_envelope,
)
from webhookd._events import check_event_kinds

# The spec's fourteen kinds (its section 6); the catalog may hold more (operational events, apikey.leaked).
SPEC_KINDS = {
    "booking.confirmed", "booking.failed", "booking.cancelled", "booking.modified", "payment.succeeded",
    "payment.failed", "payment.refunded", "esim.provisioned", "esim.usage_threshold", "ledger.low_balance",
    "search_quota.threshold", "settlement.invoice_issued", "settlement.payment_failed", "apikey.revoked",
}  # fmt: skip


def test_every_kind_of_the_spec_and_the_operational_ones_once() -> None:
    assert len(EVENT_KINDS) == len(set(EVENT_KINDS))
    assert SPEC_KINDS <= set(EVENT_KINDS)
    assert {"endpoint.failing", "endpoint.disabled", "endpoint.recovered", "delivery.exhausted"} < set(
        EVENT_KINDS
    )


@pytest.mark.parametrize(
    ("kinds", "ok"),
    [
        (["booking.confirmed"], ["booking.confirmed"]),
        (
            ["booking.confirmed", "booking.confirmed", "apikey.revoked"],
            ["booking.confirmed", "apikey.revoked"],
        ),
        ([], None),
        (["booking.exploded"], None),
        (["webhook.test"], None),
    ],
)
def test_check_event_kinds(kinds: list[str], ok: list[str] | None) -> None:
    if ok is None:
        with pytest.raises(InvalidRequest) as info:
            check_event_kinds(kinds)
        assert info.value.message.startswith("events:")
    else:
        assert check_event_kinds(kinds) == ok


def test_envelope_shape() -> None:
    body = build_envelope(
        event_id="evt_1",
        kind="booking.confirmed",
        created=dt.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=dt.UTC),
        environment=Environment.SANDBOX,
        account_id="acct_1",
        state="confirmed",
        data={"booking": "bk_1", "é": 1},
    )
    assert json.loads(body) == {
        "id": "evt_1",
        "type": "booking.confirmed",
        "created": "2026-01-02T03:04:05.678Z",
        "livemode": False,
        "account": "acct_1",
        "state": "confirmed",
        "data": {"booking": "bk_1", "é": 1},
    }
    assert list(json.loads(body)) == ["id", "type", "created", "livemode", "account", "state", "data"]


def test_envelope_size_limit() -> None:
    with pytest.raises(PayloadTooLarge):
        build_envelope(
            event_id="evt_1",
            kind="booking.confirmed",
            created=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
            environment=Environment.LIVE,
            account_id="acct_1",
            state="s",
            data={"x": "a" * MAX_PAYLOAD_BYTES},
        )
