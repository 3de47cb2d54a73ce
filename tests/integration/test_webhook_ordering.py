"""Ordered delivery over real sockets, on SQLite and PostgreSQL: an endpoint that asks for per-resource
order gets one delivery in flight per booking (or eSIM order), oldest event first, while other bookings'
events flow; an unordered endpoint next to it is unaffected; the order is an endpoint field, and making
the endpoint unordered releases what waits; the circuit breaker holds ordered deliveries as any. A
FakeClock drives the retry schedule (``worker.run_once``); the last test runs the pipelined worker (one
process, and two on one PostgreSQL) under its per-endpoint cap."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import pathlib
import threading
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from google.protobuf import field_mask_pb2, struct_pb2

from svckit import catalog
from svckit.clock import FakeClock
from travel.webhooks.v1 import webhooks_pb2 as pb
from travel.webhooks.v1 import webhooks_pb2_grpc
from webhookd import Policy
from webhookd._delivery import WorkerConfig
from webhookd._server import Config, Webhookd, run_server
from webhookd.testing import Received, Receiver, Silent, trusted_receiver

LIVE = pb.ENVIRONMENT_LIVE
ACCT = "acct_ordering"
T0 = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
MIN = dt.timedelta(minutes=1)
SCOPE: dict[str, Any] = {"account_id": ACCT, "environment": LIVE}
KINDS = ["booking.confirmed", "booking.modified", "booking.cancelled", "ledger.low_balance"]
A, B = "bk_test_aaaa", "bk_test_bbbb"


def event_of(request: Received) -> tuple[str, str]:
    """(event id, booking) of a delivery."""
    body = json.loads(request.body)
    return body["id"], body["data"].get("booking", "")


class Stack:
    def __init__(self, app: Webhookd, clock: FakeClock, receiver: Receiver) -> None:
        self.app, self.clock, self.receiver = app, clock, receiver
        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.port}")
        self.stub = webhooks_pb2_grpc.WebhookServiceStub(self.channel)
        self.fail_once: set[str] = set()  # event ids whose first delivery (per path) answers 500
        self._failed: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        receiver.responder = self._respond

    def _respond(self, request: Received) -> int:
        event_id, _booking = event_of(request)
        with self._lock:
            if event_id in self.fail_once and (request.path, event_id) not in self._failed:
                self._failed.add((request.path, event_id))
                return 500
        return 200

    async def register(self, path: str, ordering: pb.DeliveryOrder.ValueType) -> pb.Endpoint:
        reg = await self.stub.RegisterEndpoint(
            pb.RegisterEndpointRequest(**SCOPE, url=self.receiver.url(path), events=KINDS, ordering=ordering)
        )
        endpoint: pb.Endpoint = reg.endpoint
        return endpoint

    async def publish(self, kind: str, booking: str = "") -> str:
        if booking:
            data = catalog.event_data(kind, {**catalog.SAMPLE_BOOKING, "booking": booking}, "A")
        else:
            data = catalog.low_balance()
        struct = struct_pb2.Struct()
        struct.update(data)
        pub = await self.stub.PublishEvent(pb.PublishEventRequest(**SCOPE, type=kind, data=struct))
        return str(pub.event.id)

    def sent(self, path: str) -> list[tuple[str, str]]:
        """(event id, booking) of each request to ``path``, in arrival order."""
        return [event_of(r) for r in self.receiver.received() if r.path == path]

    async def run_at(self, when: dt.datetime) -> int:
        self.clock.set(when)
        return await self.app.worker.run_once()


@contextlib.asynccontextmanager
async def running(tmp_path: pathlib.Path, db_url: str, **settings: Any) -> AsyncIterator[Stack]:
    """webhookd on ``db_url`` with a FakeClock and no worker loop, and a receiver."""
    receiver, ca = trusted_receiver(tmp_path)
    config = Config(
        database=db_url,
        listen="127.0.0.1:0",
        policy=Policy(allow_private=True),
        ca_bundle=str(ca),
        **settings,
    )
    clock = FakeClock(T0)
    app = await run_server(config, clock=clock, start_worker=False)
    s = Stack(app, clock, receiver)
    try:
        yield s
    finally:
        await s.channel.close()
        await app.stop(0)
        receiver.stop()


@pytest.fixture
async def stack(tmp_path: pathlib.Path, db_url: str) -> AsyncIterator[Stack]:
    async with running(tmp_path, db_url) as s:
        yield s


async def test_a_failing_head_holds_its_booking_back_while_others_flow(stack: Stack) -> None:
    ordered = await stack.register("/ordered", pb.DELIVERY_ORDER_PER_RESOURCE)
    assert ordered.ordering == pb.DELIVERY_ORDER_PER_RESOURCE
    plain = await stack.register("/plain", pb.DELIVERY_ORDER_UNSPECIFIED)
    assert plain.ordering == pb.DELIVERY_ORDER_UNORDERED  # the default
    a1 = await stack.publish("booking.confirmed", A)
    b1 = await stack.publish("booking.confirmed", B)
    a2 = await stack.publish("booking.modified", A)
    b2 = await stack.publish("booking.modified", B)
    low = await stack.publish("ledger.low_balance")  # no resource: never held back
    a3 = await stack.publish("booking.cancelled", A)
    stack.fail_once.add(a1)

    # The ordered endpoint gets the head of each booking and the keyless event; the unordered one all six.
    assert await stack.run_at(T0) == 3 + 6
    assert sorted(stack.sent("/ordered")) == sorted([(a1, A), (b1, B), (low, "")])
    assert sorted(stack.sent("/plain")) == sorted([(a1, A), (b1, B), (a2, A), (b2, B), (low, ""), (a3, A)])

    # b1 succeeded: b2 goes; a1 failed and waits for its retry (1 min), and a2, a3 wait behind it.
    assert await stack.run_at(T0 + dt.timedelta(seconds=1)) == 1
    assert stack.sent("/ordered")[-1] == (b2, B)
    assert await stack.run_at(T0 + dt.timedelta(seconds=30)) == 0
    # Neither due nor late while their head waits: the next due time is the head's retry.
    assert await stack.app.repo.queue.next_due() == T0 + MIN
    assert (await stack.app.repo.queue.stats(T0 + dt.timedelta(seconds=30))).oldest_overdue_seconds == 0.0
    waiting = await stack.stub.ListDeliveries(pb.ListDeliveriesRequest(**SCOPE, event_id=a2))
    (d,) = [d for d in waiting.deliveries if d.endpoint_id == ordered.id]
    assert d.status == pb.DELIVERY_STATUS_PENDING and d.attempt_count == 0

    # The retries succeed (both endpoints'); then a2, then a3, one at a time.
    assert await stack.run_at(T0 + MIN) == 2
    assert await stack.run_at(T0 + MIN) == 1
    assert await stack.run_at(T0 + MIN) == 1
    assert await stack.run_at(T0 + 2 * MIN) == 0
    booking_a = [e for e, bk in stack.sent("/ordered") if bk == A]
    assert booking_a == [a1, a1, a2, a3]  # a2 never before a1's success
    # The unordered endpoint retried a1 too, after a2 and a3 had already arrived (sent in parallel).
    plain_a = [e for e, bk in stack.sent("/plain") if bk == A]
    assert sorted(plain_a[:3]) == sorted([a1, a2, a3]) and plain_a[3:] == [a1]


async def test_the_order_is_an_endpoint_field_and_unordering_releases_what_waits(stack: Stack) -> None:
    ep = await stack.register("/ordered", pb.DELIVERY_ORDER_PER_RESOURCE)
    got = await stack.stub.GetEndpoint(pb.GetEndpointRequest(**SCOPE, endpoint_id=ep.id))
    assert got.endpoint.ordering == pb.DELIVERY_ORDER_PER_RESOURCE
    a1 = await stack.publish("booking.confirmed", A)
    a2 = await stack.publish("booking.modified", A)
    stack.fail_once.add(a1)
    assert await stack.run_at(T0) == 1
    assert await stack.run_at(T0 + dt.timedelta(seconds=1)) == 0  # a2 waits behind a1's retry

    def update(order: pb.DeliveryOrder.ValueType) -> pb.UpdateEndpointRequest:
        mask = field_mask_pb2.FieldMask(paths=["ordering"])
        return pb.UpdateEndpointRequest(**SCOPE, endpoint_id=ep.id, update_mask=mask, ordering=order)

    updated = await stack.stub.UpdateEndpoint(update(pb.DELIVERY_ORDER_UNORDERED))
    assert updated.endpoint.ordering == pb.DELIVERY_ORDER_UNORDERED
    assert await stack.run_at(T0 + dt.timedelta(seconds=2)) == 1  # a2 no longer waits
    assert stack.sent("/ordered") == [(a1, A), (a2, A)]

    # Ordered again: events published from then on are ordered.
    await stack.stub.UpdateEndpoint(update(pb.DELIVERY_ORDER_PER_RESOURCE))
    a3 = await stack.publish("booking.cancelled", A)
    assert await stack.run_at(T0 + dt.timedelta(seconds=3)) == 1
    assert stack.sent("/ordered")[-1] == (a3, A)

    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stack.stub.UpdateEndpoint(update(pb.DeliveryOrder.ValueType(9)))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "ordering" in str(info.value.details())
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stack.stub.RegisterEndpoint(
            pb.RegisterEndpointRequest(
                **SCOPE, url=stack.receiver.url(), events=KINDS, ordering=pb.DeliveryOrder.ValueType(7)
            )
        )
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_an_open_breaker_holds_an_ordered_endpoint_and_its_keys_stay_in_order(
    tmp_path: pathlib.Path, db_url: str
) -> None:
    """The endpoint's circuit breaker applies to ordered deliveries as to any: while it is open one probe
    goes per interval, the heads wait unsent, and the later events of their bookings wait behind them."""
    silent = Silent()
    settings: dict[str, Any] = {"delivery_timeout": 0.3, "worker": WorkerConfig(breaker_threshold=2)}
    try:
        async with running(tmp_path, db_url, **settings) as stack:
            ep = await stack.stub.RegisterEndpoint(
                pb.RegisterEndpointRequest(
                    **SCOPE, url=silent.url(), events=KINDS, ordering=pb.DELIVERY_ORDER_PER_RESOURCE
                )
            )
            heads = [await stack.publish("booking.confirmed", A), await stack.publish("booking.confirmed", B)]
            later = [await stack.publish("booking.modified", A), await stack.publish("booking.modified", B)]

            async def attempts(event_id: str) -> tuple[int, int]:
                listed = await stack.stub.ListDeliveries(pb.ListDeliveriesRequest(**SCOPE, event_id=event_id))
                (d,) = [d for d in listed.deliveries if d.endpoint_id == ep.endpoint.id]
                return d.status, d.attempt_count

            assert await stack.run_at(T0) == 2  # the two heads; both time out and open the breaker
            assert silent.accepted == 2
            # A minute on both heads are due: the breaker lets one go as a probe, the other waits unsent.
            assert await stack.run_at(T0 + MIN) == 2
            assert silent.accepted == 3
            assert sorted([(await attempts(e))[1] for e in heads]) == [1, 2]
            for e in later:
                assert await attempts(e) == (pb.DELIVERY_STATUS_PENDING, 0)
    finally:
        silent.stop()


@pytest.mark.parametrize("processes", [1, 2])
async def test_the_running_workers_keep_one_per_booking_within_the_endpoint_cap(
    tmp_path: pathlib.Path, db_url: str, processes: int
) -> None:
    """The pipelined worker (two webhookd on one PostgreSQL too): at most one request per booking at the
    receiver at any moment, each booking's events in publish order, several bookings at once but never
    more than the endpoint's cap (per process)."""
    if processes > 1 and db_url.startswith("sqlite"):
        pytest.skip("SQLite is one webhookd process")
    receiver, ca = trusted_receiver(tmp_path)
    receiver.delay = 0.1  # every answer takes as long, so answers come back in arrival order
    overlaps: list[str] = []
    most = [0]

    def respond(request: Received) -> int:
        # On the receiver's loop, as its answers: the requests not answered yet are the last ones.
        unanswered = receiver.received()[receiver.answered :]
        _event, booking = event_of(request)
        if booking in {event_of(r)[1] for r in unanswered}:
            overlaps.append(booking)
        most[0] = max(most[0], len(unanswered) + 1)
        return 200

    receiver.responder = respond
    config = Config(
        database=db_url,
        listen="127.0.0.1:0",
        policy=Policy(allow_private=True),
        ca_bundle=str(ca),
        worker=WorkerConfig(per_endpoint=3, poll_seconds=0.05),
    )
    apps = [await run_server(config) for _ in range(processes)]
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{apps[0].port}")
    stub = webhooks_pb2_grpc.WebhookServiceStub(channel)
    try:
        await stub.RegisterEndpoint(
            pb.RegisterEndpointRequest(
                **SCOPE, url=receiver.url(), events=KINDS, ordering=pb.DELIVERY_ORDER_PER_RESOURCE
            )
        )
        bookings = [f"bk_test_{i:04d}" for i in range(8)]
        published: dict[str, list[str]] = {b: [] for b in bookings}
        # Booking by booking: unordered, a booking's three events would be due and sent together.
        for booking in bookings:
            for kind in ("booking.confirmed", "booking.modified", "booking.cancelled"):
                data = catalog.event_data(kind, {**catalog.SAMPLE_BOOKING, "booking": booking}, "A")
                struct = struct_pb2.Struct()
                struct.update(data)
                pub = await stub.PublishEvent(pb.PublishEventRequest(**SCOPE, type=kind, data=struct))
                published[booking].append(pub.event.id)
        got = await receiver.wait_for(24, within=60)
        arrived: dict[str, list[str]] = {b: [] for b in bookings}
        for r in got:
            event_id, booking = event_of(r)
            arrived[booking].append(event_id)
        assert arrived == published
        assert overlaps == []
        assert 1 < most[0] <= 3 * processes  # parallel across bookings, within the per-endpoint cap
    finally:
        await channel.close()
        for app in apps:
            await app.stop(0)
        receiver.stop()
