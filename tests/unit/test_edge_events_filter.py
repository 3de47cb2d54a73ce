"""Which event kinds a key may read back from GET /v1/events (edge.streamfilter.readable_kinds): the
stream's rule, decided per kind before asking webhookd; each event is then checked by its data."""

from __future__ import annotations

import pytest

from edge.streamfilter import readable_kinds
from svckit.events import EVENT_KINDS

BOOKING_PAYMENT = [k for k in EVENT_KINDS if k.startswith(("booking.", "payment."))]
ESIM = [k for k in EVENT_KINDS if k.startswith("esim.")]
SUBJECT = ["booking.failed", "payment.succeeded", "payment.failed", "payment.refunded"]
ACCOUNT = [k for k in EVENT_KINDS if k not in BOOKING_PAYMENT and k not in ESIM]


@pytest.mark.parametrize(
    ("scopes", "expected"),
    [
        ([], []),
        (["webhooks:read", "webhooks:write"], []),
        (["account:read"], ACCOUNT),
        (["hotels:read"], BOOKING_PAYMENT),
        (["flights:write"], []),  # write does not imply read
        # An eSIM order's failure and payments carry product esim; an order is never confirmed or cancelled.
        (["esim:read"], [*SUBJECT, *ESIM]),
        (["hotels:read", "account:read"], [*BOOKING_PAYMENT, *ACCOUNT]),
        (["account:read", "esim:read", "flights:read"], list(EVENT_KINDS)),
    ],
)
def test_readable_kinds(scopes: list[str], expected: list[str]) -> None:
    assert sorted(readable_kinds(scopes)) == sorted(expected)
