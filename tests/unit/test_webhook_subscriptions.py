"""What an endpoint's events may be (webhookd._subscriptions), by table."""

from __future__ import annotations

import pytest

from webhookd._errors import InvalidRequest
from webhookd._subscriptions import EVERY, needs_mode, receives, subscription


@pytest.mark.parametrize(
    ("kinds", "mode", "stored"),
    [
        (["*"], "A", ["*"]),
        (["*"], "", ["*"]),
        (
            ["booking.confirmed", "booking.confirmed", "apikey.revoked"],
            "A",
            ["booking.confirmed", "apikey.revoked"],
        ),
        (["payment.succeeded"], "B", ["payment.succeeded"]),
        (["payment.succeeded"], "", ["payment.succeeded"]),  # the mode unknown: nothing refused
        (["ledger.low_balance"], "a", ["ledger.low_balance"]),
    ],
)
def test_accepted(kinds: list[str], mode: str, stored: list[str]) -> None:
    assert subscription(kinds, mode) == stored


@pytest.mark.parametrize(
    ("kinds", "mode", "says"),
    [
        (["payment.succeeded"], "A", "payment.succeeded exists for mode B accounts only"),
        (["booking.confirmed", "payment.refunded"], "A", "payment.refunded"),
        (["ledger.low_balance"], "B", "mode A accounts only"),
        (["*", "booking.confirmed"], "A", '"*" means every kind'),
        (["booking.*"], "A", "unknown event kind"),
        ([], "A", "at least one"),
    ],
)
def test_refused(kinds: list[str], mode: str, says: str) -> None:
    with pytest.raises(InvalidRequest, match=None) as info:
        subscription(kinds, mode)
    assert says in str(info.value)


@pytest.mark.parametrize(
    ("subscribed", "kind", "expected"),
    [
        ([EVERY], "booking.confirmed", True),
        ([EVERY], "a.kind_added_later", True),
        (["booking.confirmed"], "booking.confirmed", True),
        (["booking.confirmed"], "booking.failed", False),
    ],
)
def test_receives(subscribed: list[str], kind: str, expected: bool) -> None:
    assert receives(subscribed, kind) is expected


def test_needs_mode() -> None:
    assert needs_mode(["booking.confirmed", "payment.failed"]) and not needs_mode(["*", "booking.failed"])
