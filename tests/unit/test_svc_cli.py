"""svc's pure parts: which product call a failure trigger makes, the stream URL, and that a forwarded body
is byte for byte the body webhookd delivers for the same event."""

from __future__ import annotations

import argparse
import datetime as dt
import json

import pytest

from svccli.__main__ import EXPECTED_STATUS, failure_request
from svccli.listen import forward_body, stream_url
from svccli.webhooks import recover_line, since_time
from webhookd import Environment, build_envelope

CASES = [
    ("rate_limited", "hotels", ("GET", "/v1/hotels/search")),
    ("service_unavailable", "esim", ("GET", "/v1/esim/plans")),
    ("search_quota_exhausted", "flights", ("GET", "/v1/flights/search")),
    ("credit_exhausted", "hotels", ("POST", "/v1/hotels/bookings")),
    ("booking_failed", "esim", ("POST", "/v1/esim/orders")),
    ("payment_failed", "flights", ("POST", "/v1/flights/bookings")),
]


@pytest.mark.parametrize(("trigger", "product", "expected"), CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_failure_request(trigger: str, product: str, expected: tuple[str, str]) -> None:
    assert failure_request(trigger, product) == expected
    assert trigger in EXPECTED_STATUS


def test_search_quota_needs_a_search_product() -> None:
    with pytest.raises(ValueError, match="--product hotels or flights"):
        failure_request("search_quota_exhausted", "esim")


def test_stream_url() -> None:
    assert stream_url("http://127.0.0.1:8081/") == "ws://127.0.0.1:8081/v1/stream"
    assert stream_url("https://sandbox.svc.example") == "wss://sandbox.svc.example/v1/stream"


def test_forwarded_body_is_the_delivered_body() -> None:
    body = build_envelope(
        event_id="evt_1", kind="booking.confirmed", environment=Environment.SANDBOX, account_id="acct_1",
        created=dt.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=dt.UTC), state="confirmed",
        data={"booking": "bk_test_1", "amount": 25800, "customerRef": "Zoë", "x": {"b": 1, "a": [1.5]}},
    )  # fmt: skip
    assert forward_body(json.loads(body)) == body


NOW = dt.datetime(2026, 11, 25, 12, 0, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("text", "sent"),
    [
        ("2h", "2026-11-25T10:00:00Z"),
        ("30m", "2026-11-25T11:30:00Z"),
        ("7d", "2026-11-18T12:00:00Z"),
        ("2026-11-24T08:00", "2026-11-24T08:00:00Z"),  # no offset: UTC
        ("2026-11-24T08:00:00Z", "2026-11-24T08:00:00Z"),
        ("2026-11-24T10:00:00+02:00", "2026-11-24T08:00:00Z"),
    ],
)
def test_webhooks_since(text: str, sent: str) -> None:
    assert since_time(text, NOW) == sent


@pytest.mark.parametrize("text", ["yesterday", "2 h", "-2h", "2w", ""])
def test_webhooks_since_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        since_time(text, NOW)


def test_webhooks_recover_lines() -> None:
    assert recover_line("we_1", 1, "T", dry_run=True) == (
        "1 delivery of we_1 would be queued again (held or failed since T); dry run: nothing changed"
    )
    assert (
        recover_line("we_1", 0, "T", dry_run=False)
        == "0 deliveries of we_1 queued again (held or failed since T)"
    )
