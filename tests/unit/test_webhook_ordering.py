"""Ordered delivery (``webhookd._ordering``), by table: which key a new delivery gets, which earlier
deliveries hold it back, what the catalog declares; then the claim's rule on the in-memory queue (the SQL
stores run the same rule: tests/integration/test_webhook_ordering.py)."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import json
from typing import Any

import pytest

from svckit import catalog
from svckit.eventkinds import KINDS, TEST_KIND
from svckit.webhook_status import DeliveryOrder, DeliveryStatus, EndpointStatus
from webhookd._memory_queue import MemoryQueue
from webhookd._ordering import held_back, ordering_key
from webhookd._repository import DeliveryRecord, DeliveryResult, EndpointRecord, SigningSecret

NOW = dt.datetime(2026, 5, 1, 8, 0, tzinfo=dt.UTC)
MIN = dt.timedelta(minutes=1)
ORDERED, UNORDERED = DeliveryOrder.PER_RESOURCE, DeliveryOrder.UNORDERED
BK = {"booking": "bk_a", "offer": "off_1"}
ORD = {"order": "ord_e", "plan": "plan_1"}

KEYS: dict[str, tuple[DeliveryOrder, str, dict[str, Any], str | None]] = {
    "booking event, ordered endpoint: the booking": (ORDERED, "booking.confirmed", BK, "bk_a"),
    "booking event, unordered endpoint: none": (UNORDERED, "booking.confirmed", BK, None),
    "payment of a booking: the booking": (ORDERED, "payment.succeeded", {**BK, "payment": "pay_1"}, "bk_a"),
    "payment of an eSIM order: the order": (ORDERED, "payment.failed", {**ORD, "payment": "pay_1"}, "ord_e"),
    "booking.failed of an eSIM order: the order": (ORDERED, "booking.failed", ORD, "ord_e"),
    "eSIM event: the order": (ORDERED, "esim.provisioned", ORD, "ord_e"),
    "eSIM event, unordered: none": (UNORDERED, "esim.usage_threshold", ORD, None),
    "kind with no resource: never held": (ORDERED, "ledger.low_balance", {"amount": 1}, None),
    "operational event: never held": (ORDERED, "endpoint.disabled", {"endpointId": "we_1"}, None),
    "the test kind: never held": (ORDERED, TEST_KIND.kind, {"endpointId": "we_1"}, None),
    "key field missing: none": (ORDERED, "booking.confirmed", {"offer": "off_1"}, None),
    "key field not a string: none": (ORDERED, "booking.confirmed", {"booking": 7}, None),
    "key field empty: none": (ORDERED, "booking.modified", {"booking": ""}, None),
    "unknown kind: none": (ORDERED, "booking.teleported", BK, None),
}  # fmt: skip


@pytest.mark.parametrize(("order", "kind", "data", "key"), KEYS.values(), ids=KEYS.keys())
def test_the_ordering_key_of_a_new_delivery(
    order: DeliveryOrder, kind: str, data: dict[str, Any], key: str | None
) -> None:
    assert ordering_key(order, kind, data) == key


P, S, F, H = (str(s) for s in (DeliveryStatus.PENDING, DeliveryStatus.SUCCEEDED, DeliveryStatus.FAILED,
                                DeliveryStatus.HELD))  # fmt: skip
HELD_BACK: dict[str, tuple[str | None, int, list[tuple[str | None, int, str]], bool]] = {
    "first of its key": ("bk_a", 1, [], False),
    "earlier one pending (in flight or retrying)": ("bk_a", 2, [("bk_a", 1, P)], True),
    "earlier one succeeded": ("bk_a", 2, [("bk_a", 1, S)], False),
    "earlier one failed for good": ("bk_a", 2, [("bk_a", 1, F)], False),
    "earlier one held (endpoint disabled)": ("bk_a", 2, [("bk_a", 1, H)], False),
    "another key's pending one": ("bk_a", 2, [("bk_b", 1, P)], False),
    "a later one pending": ("bk_a", 2, [("bk_a", 3, P)], False),
    "no key: never held back": (None, 2, [(None, 1, P)], False),
    "one of several earlier still pending": ("bk_a", 5, [("bk_a", 1, S), ("bk_a", 3, P), ("bk_a", 4, P)],
                                             True),
    "all earlier done": ("bk_a", 5, [("bk_a", 1, S), ("bk_a", 3, F), ("bk_b", 4, P)], False),
}  # fmt: skip


@pytest.mark.parametrize(("key", "seq", "earlier", "held"), HELD_BACK.values(), ids=HELD_BACK.keys())
def test_which_earlier_deliveries_hold_one_back(
    key: str | None, seq: int, earlier: list[tuple[str | None, int, str]], held: bool
) -> None:
    assert held_back(key, seq, earlier) is held


def test_the_catalog_declares_a_resource_for_every_kind_about_one() -> None:
    """A kind whose data names a booking or an eSIM order is ordered by it; its declared fields are
    string properties of its schema; kinds about no such resource declare none."""
    for kind in KINDS.values():
        properties = kind.schema["properties"]
        about = [f for f in ("booking", "order") if f in properties]
        assert list(kind.ordering) == about, kind.kind
        for name in kind.ordering:
            assert properties[name]["type"] == "string"
    # Every sample of a keyed kind has its key: the sandbox's events are ordered like live ones.
    for name in ("booking.confirmed", "payment.refunded", "esim.provisioned"):
        subject = catalog.SAMPLE_ORDER if name.startswith("esim") else catalog.SAMPLE_BOOKING
        data = catalog.event_data(name, subject, "B")
        assert ordering_key(ORDERED, name, data) == subject.get("booking", subject.get("order"))


# -- the claim's rule on the in-memory queue ------------------------------------------------------------
EP = "we_ord"


def _queue(order: DeliveryOrder, *rows: tuple[str, str | None, int]) -> MemoryQueue:
    """Deliveries (id, ordering key, event seq), all due now, to one endpoint of ``order``."""
    queue = MemoryQueue()
    queue.add_endpoint(
        EndpointRecord(
            EP,
            "acct_1",
            "live",
            "https://hooks.example.com/h",
            ["booking.confirmed"],
            "",
            EndpointStatus.ENABLED,
            "",
            NOW,
            NOW,
            [SigningSecret("whsec_" + "A" * 44)],
            ordering=order,
        )
    )
    deliveries = []
    for delivery_id, key, seq in rows:
        queue.add_event(f"evt_{delivery_id}", json.dumps({"id": delivery_id}).encode())
        deliveries.append(
            DeliveryRecord(
                delivery_id,
                f"evt_{delivery_id}",
                EP,
                "acct_1",
                "live",
                "booking.confirmed",
                DeliveryStatus.PENDING,
                0,
                0,
                NOW,
                NOW,
                NOW,
                key,
                seq,
            )
        )
    asyncio.run(queue.fan_out(deliveries))
    return queue


def _claim(queue: MemoryQueue, at: dt.datetime = NOW) -> list[str]:
    claims = asyncio.run(queue.claim_due(at, 10, at + MIN, "wrk_1"))
    return sorted(c.delivery.id for c in claims)


def _result(delivery_id: str, status: DeliveryStatus, nxt: dt.datetime | None = None) -> DeliveryResult:
    return DeliveryResult(delivery_id, EP, None, status, nxt, counts_attempt=True)


def test_one_claim_takes_the_head_of_each_key_and_every_unkeyed_delivery() -> None:
    queue = _queue(ORDERED, ("a1", "bk_a", 1), ("a2", "bk_a", 2), ("b1", "bk_b", 3), ("b2", "bk_b", 4),
                   ("n1", None, 5), ("n2", None, 6))  # fmt: skip
    assert _claim(queue) == ["a1", "b1", "n1", "n2"]
    # In flight, the heads still hold their keys back.
    assert _claim(queue) == []


def test_a_retrying_head_holds_its_key_back_until_it_succeeds() -> None:
    queue = _queue(ORDERED, ("a1", "bk_a", 1), ("a2", "bk_a", 2), ("a3", "bk_a", 3), ("b1", "bk_b", 4))
    assert _claim(queue) == ["a1", "b1"]
    asyncio.run(queue.record_outcomes([_result("a1", DeliveryStatus.PENDING, NOW + MIN),
                                       _result("b1", DeliveryStatus.SUCCEEDED)], "wrk_1", NOW))  # fmt: skip
    assert _claim(queue) == []  # a2 waits for a1's retry
    # Not due before its head: an idle worker sleeps until the retry instead of spinning on a2.
    assert asyncio.run(queue.next_due()) == NOW + MIN
    stats = asyncio.run(queue.stats(NOW))
    assert stats.queue_depth == 3 and stats.oldest_overdue_seconds == 0.0
    assert _claim(queue, NOW + MIN) == ["a1"]
    asyncio.run(queue.record_outcomes([_result("a1", DeliveryStatus.SUCCEEDED)], "wrk_1", NOW + MIN))
    assert _claim(queue, NOW + MIN) == ["a2"]
    # A head that fails for good releases the next one.
    asyncio.run(queue.record_outcomes([_result("a2", DeliveryStatus.FAILED)], "wrk_1", NOW + MIN))
    assert _claim(queue, NOW + MIN) == ["a3"]


def test_an_unordered_endpoint_holds_nothing_back() -> None:
    queue = _queue(UNORDERED, ("a1", None, 1), ("a2", None, 2), ("a3", None, 3))
    assert _claim(queue) == ["a1", "a2", "a3"]


def test_made_unordered_what_waits_goes() -> None:
    queue = _queue(ORDERED, ("a1", "bk_a", 1), ("a2", "bk_a", 2), ("a3", "bk_a", 3))
    assert _claim(queue) == ["a1"]
    assert asyncio.run(queue.unorder(EP)) == 3
    assert _claim(queue) == ["a2", "a3"]
    assert all(d["ordering_key"] is None for d in queue.deliveries.values())


def test_the_record_fields_have_columns() -> None:
    names = {f.name for f in dataclasses.fields(DeliveryRecord)}
    assert {"ordering_key", "event_seq"} <= names
