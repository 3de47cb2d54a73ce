"""Which events a stream's key may read and wants (edge.streamfilter), by table."""

from __future__ import annotations

import pytest

from edge.streamfilter import may_read, scopes_for_event, wanted


# -- stream filter ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("event_type", "data", "scopes"),
    [
        ("booking.confirmed", {"product": "hotels"}, ("hotels:read",)),
        ("payment.refunded", {"product": "flights"}, ("flights:read",)),
        ("booking.failed", {}, ("hotels:read", "flights:read", "esim:read")),
        ("booking.failed", {"product": "cars"}, ("hotels:read", "flights:read", "esim:read")),
        ("esim.provisioned", {}, ("esim:read",)),
        ("ledger.low_balance", None, ("account:read",)),
        ("apikey.revoked", None, ("account:read",)),
        ("settlement.invoice_issued", None, ("account:read",)),
    ],
)
def test_scopes_for_event(event_type: str, data: dict[str, str] | None, scopes: tuple[str, ...]) -> None:
    assert scopes_for_event(event_type, data) == scopes


@pytest.mark.parametrize(
    ("scopes", "event_type", "data", "ok"),
    [
        (["hotels:read"], "booking.confirmed", {"product": "hotels"}, True),
        (["hotels:write"], "booking.confirmed", {"product": "hotels"}, False),
        (["flights:read"], "booking.confirmed", {"product": "hotels"}, False),
        (["account:read"], "booking.confirmed", {"product": "hotels"}, False),
        (["account:read"], "apikey.revoked", {}, True),
        (["hotels:read"], "apikey.revoked", {}, False),
        (["esim:read"], "esim.usage_threshold", {}, True),
    ],
)
def test_may_read(scopes: list[str], event_type: str, data: dict[str, str], ok: bool) -> None:
    assert may_read(scopes, event_type, data) is ok


@pytest.mark.parametrize(
    ("subscribed", "event_type", "ok"),
    [
        (None, "booking.confirmed", True),
        ([], "booking.confirmed", True),
        (["booking.confirmed"], "booking.confirmed", True),
        (["booking.*"], "booking.cancelled", True),
        (["booking.*"], "bookingx.y", False),
        (["payment.failed"], "booking.confirmed", False),
        (["*"], "ledger.low_balance", True),
    ],
)
def test_wanted(subscribed: list[str] | None, event_type: str, ok: bool) -> None:
    assert wanted(subscribed, event_type) is ok
