"""Which event kinds fit which commercial mode (svckit.events.mode_refusal), and the read-only rule's
business writes (authsvc business_write): pure functions, by table."""

from __future__ import annotations

import pytest

from authsvc._decision import business_write
from svckit.events import EVENT_KINDS, mode_refusal


@pytest.mark.parametrize(
    ("kind", "mode", "refused"),
    [
        ("payment.succeeded", "B", False),
        ("payment.failed", "b", False),
        ("payment.refunded", "B", False),
        ("payment.succeeded", "A", True),
        ("payment.failed", "a", True),
        ("payment.refunded", "A", True),
        ("ledger.low_balance", "A", False),
        ("ledger.low_balance", "B", True),
        ("booking.confirmed", "A", False),
        ("booking.confirmed", "B", False),
        ("settlement.payment_failed", "A", False),  # the account's own settlement, not a traveller's payment
        ("settlement.payment_failed", "B", False),
        ("search_quota.threshold", "B", False),
        ("payment.failed", "", False),  # mode unknown to the caller: nothing to decide on
    ],
)
def test_mode_refusal(kind: str, mode: str, refused: bool) -> None:
    message = mode_refusal(kind, mode)
    assert bool(message) is refused
    if refused:
        assert kind in message and f"mode {mode.upper()}" in message


def test_every_kind_fits_at_least_one_mode() -> None:
    for kind in EVENT_KINDS:
        assert not mode_refusal(kind, "A") or not mode_refusal(kind, "B"), kind


@pytest.mark.parametrize(
    ("scope", "is_write", "business"),
    [
        ("hotels:write", True, True),
        ("flights:write", True, True),
        ("esim:write", True, True),
        ("account:write", True, False),  # DELETE /v1/customers/{ref}: a privacy duty
        ("webhooks:write", True, False),  # to receive the settlement events that say why
        ("hotels:read", False, False),
        ("", False, False),
    ],
)
def test_business_write(scope: str, is_write: bool, business: bool) -> None:
    assert business_write(scope, is_write) is business
