"""Receivers that steer or stall delivery, over real sockets, with a FakeClock driving the schedule: one
that answers 410 Gone, one that answers 429/503 with Retry-After, one that takes connections and never
answers (the circuit breaker), one that fails until disabled (the operational events); on SQLite and
PostgreSQL."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import pathlib
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from google.protobuf import field_mask_pb2

from svckit.clock import FakeClock
from tests.support import event_data
from travel.webhooks.v1 import webhooks_pb2 as pb
from travel.webhooks.v1 import webhooks_pb2_grpc
from webhookd import Policy
from webhookd._breaker import State
from webhookd._delivery import WorkerConfig
from webhookd._mailer import compose
from webhookd._server import Config, Webhookd, run_server
from webhookd._steering import GONE_REASON
from webhookd.testing import Receiver, Responder, Silent, trusted_receiver

LIVE = pb.ENVIRONMENT_LIVE
ACCT = "acct_hostile"
T0 = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
MIN = dt.timedelta(minutes=1)
SCOPE: dict[str, Any] = {"account_id": ACCT, "environment": LIVE}


class Stack:
    def __init__(self, app: Webhookd, clock: FakeClock, receiver: Receiver) -> None:
        self.app, self.clock, self.receiver = app, clock, receiver
        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.port}")
        self.stub = webhooks_pb2_grpc.WebhookServiceStub(self.channel)

    async def register(self, url: str) -> str:
        reg = await self.stub.RegisterEndpoint(
            pb.RegisterEndpointRequest(**SCOPE, url=url, events=["booking.confirmed"])
        )
        return str(reg.endpoint.id)

    async def publish(self) -> str:
        pub = await self.stub.PublishEvent(
            pb.PublishEventRequest(
                **SCOPE, type="booking.confirmed", state="confirmed", data=event_data("booking.confirmed")
            )
        )
        return str(pub.event.id)

    async def delivery(self, event_id: str) -> Any:
        (d,) = (
            await self.stub.ListDeliveries(pb.ListDeliveriesRequest(**SCOPE, event_id=event_id))
        ).deliveries
        return d

    async def endpoint(self, endpoint_id: str) -> Any:
        return (await self.stub.GetEndpoint(pb.GetEndpointRequest(**SCOPE, endpoint_id=endpoint_id))).endpoint

    async def run_at(self, when: dt.datetime) -> int:
        self.clock.set(when)
        return await self.app.worker.run_once()


@pytest.fixture
async def stack(tmp_path: pathlib.Path, db_url: str) -> AsyncIterator[Stack]:
    receiver, ca = trusted_receiver(tmp_path)
    clock = FakeClock(T0)
    config = Config(
        database=db_url,
        listen="127.0.0.1:0",
        policy=Policy(allow_private=True),
        ca_bundle=str(ca),
        delivery_timeout=0.3,
        worker=WorkerConfig(breaker_threshold=2, breaker_interval=30.0),
    )
    app = await run_server(config, clock=clock, start_worker=False)
    s = Stack(app, clock, receiver)
    yield s
    await s.channel.close()
    await app.stop(0)
    receiver.stop()


def answer(status: int, headers: dict[str, str] | None = None) -> Responder:
    return lambda _r: (status, headers or {})


async def test_410_disables_the_endpoint_at_once_with_the_alert(stack: Stack) -> None:
    stack.receiver.responder = answer(410)
    ep = await stack.register(stack.receiver.url())
    first = await stack.publish()
    assert await stack.run_at(T0) == 1
    endpoint = await stack.endpoint(ep)
    assert endpoint.status == pb.ENDPOINT_STATUS_DISABLED and endpoint.disabled_reason == GONE_REASON
    assert (await stack.delivery(first)).status == pb.DELIVERY_STATUS_FAILED
    (alert,) = [a for a in await stack.app.repo.pending_alerts(10) if a.endpoint_id == ep]
    assert "410 Gone" in compose(alert, "webhooks@svc.test", ["ops@partner.test"])["Subject"]
    # What comes next is kept, not sent (and recoverable after re-enabling), as after the 7th failure.
    later = await stack.publish()
    assert await stack.run_at(T0 + MIN) == 0
    assert (await stack.delivery(later)).status == pb.DELIVERY_STATUS_HELD
    assert stack.receiver.count == 1
    # Reconciliation: what it missed, and a dry run of the recovery that changes nothing.
    missed = await stack.stub.ListEvents(pb.ListEventsRequest(**SCOPE, undelivered_to=ep))
    assert sorted(e.id for e in missed.events) == sorted([later, first]), (first, later, missed)
    other = await stack.register(stack.receiver.url("/other"))
    assert not (await stack.stub.ListEvents(pb.ListEventsRequest(**SCOPE, undelivered_to=other))).events
    dry = await stack.stub.RecoverEndpoint(pb.RecoverEndpointRequest(**SCOPE, endpoint_id=ep, dry_run=True))
    assert dry.recovered_count == 2
    assert (await stack.delivery(later)).status == pb.DELIVERY_STATUS_HELD
    assert (await stack.delivery(first)).status == pb.DELIVERY_STATUS_FAILED
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stack.stub.ListEvents(pb.ListEventsRequest(**SCOPE, undelivered_to="we_nope"))
    assert info.value.code() == grpc.StatusCode.NOT_FOUND


async def test_a_nul_in_an_answer_does_not_fail_the_cycle_it_is_recorded_in(stack: Stack) -> None:
    """PostgreSQL refuses NUL in text: an answer body with one, kept as it came, failed the whole cycle's
    record, so none of its results were written and every delivery in it was sent again once its lease ran
    out (other endpoints' too). The kept body has U+FFFD in its place."""
    stack.receiver.body = b"ok\x00done"
    hostile = await stack.register(stack.receiver.url("/nul"))
    other = await stack.register(stack.receiver.url("/other"))
    events = [await stack.publish(), await stack.publish()]
    assert await stack.run_at(T0) == 4  # both events to both endpoints, in one cycle
    for event_id in events:
        deliveries = (
            await stack.stub.ListDeliveries(pb.ListDeliveriesRequest(**SCOPE, event_id=event_id))
        ).deliveries
        assert sorted(d.endpoint_id for d in deliveries) == sorted([hostile, other])
        assert {d.status for d in deliveries} == {pb.DELIVERY_STATUS_SUCCEEDED}
    attempts = (await stack.stub.ListAttempts(pb.ListAttemptsRequest(**SCOPE, endpoint_id=hostile))).attempts
    assert len(attempts) == 2 and {a.response_body for a in attempts} == {"ok\ufffddone"}
    assert stack.receiver.count == 4  # nothing sent twice


async def test_retry_after_delays_the_next_attempt_within_the_six_retries(stack: Stack) -> None:
    # Seconds asking for longer than the schedule's step, then an HTTP date, then one asking for less
    # than the schedule (ignored), then one past 24 h (clamped).
    answers = iter(
        [
            answer(429, {"Retry-After": "600"}),
            answer(503, {"Retry-After": "Sun, 01 Mar 2026 14:10:00 GMT"}),  # T0 + 2 h 10 min
            answer(429, {"Retry-After": "5"}),
            answer(503, {"Retry-After": "999999"}),
            answer(429, {"Retry-After": "60"}),
            answer(429, {"Retry-After": "60"}),
            answer(429, {"Retry-After": "60"}),
        ]
    )
    ep = await stack.register(stack.receiver.url())
    event = await stack.publish()
    expected = [10 * MIN, 2 * 60 * MIN, 30 * MIN, 24 * 60 * MIN, 6 * 60 * MIN, 24 * 60 * MIN]
    due = T0
    for attempt, wait in enumerate([*expected, None], start=1):
        stack.receiver.responder = next(answers)
        assert await stack.run_at(due - dt.timedelta(microseconds=1)) == 0  # never early
        assert await stack.run_at(due) == 1
        d = await stack.delivery(event)
        assert d.attempt_count == attempt
        if wait is None:
            assert d.status == pb.DELIVERY_STATUS_FAILED
        else:
            assert d.next_attempt_at.ToDatetime(dt.UTC) - due == wait, attempt
            due += wait
    assert stack.receiver.count == 7  # the first attempt and six retries, none added
    assert (await stack.endpoint(ep)).status == pb.ENDPOINT_STATUS_DISABLED


async def test_breaker_holds_an_endpoint_that_never_answers_and_probes_it(stack: Stack) -> None:
    silent = Silent()
    try:
        ep = await stack.register(silent.url())
        events = [await stack.publish() for _ in range(4)]
        assert await stack.run_at(T0) == 4  # all four sent before any failed: each times out
        for e in events:
            assert (await stack.delivery(e)).attempt_count == 1
        # A minute on, all four are due; the breaker (open since T0) lets one go as a probe.
        assert await stack.run_at(T0 + MIN) == 4
        counts = sorted([(await stack.delivery(e)).attempt_count for e in events])
        assert counts == [1, 1, 1, 2]
        # The probe timed out: the others wait for the next probe, unsent, no attempt counted, still due
        # (``run_once`` claims them and hands them back; the worker's loop does not claim them at all).
        accepted = silent.accepted
        assert await stack.run_at(T0 + MIN + dt.timedelta(seconds=1)) == 3
        assert sorted([(await stack.delivery(e)).attempt_count for e in events]) == [1, 1, 1, 2]
        assert silent.accepted == accepted
        # The endpoint moves to a receiver that answers: the next probe closes the breaker and the rest
        # follow it.
        await stack.stub.UpdateEndpoint(
            pb.UpdateEndpointRequest(
                **SCOPE,
                endpoint_id=ep,
                update_mask=field_mask_pb2.FieldMask(paths=["url"]),
                url=stack.receiver.url(),
            )
        )
        probe_at = T0 + MIN + dt.timedelta(seconds=30)
        assert await stack.run_at(probe_at) == 3
        assert stack.receiver.count == 1
        assert await stack.run_at(probe_at + dt.timedelta(seconds=1)) == 2
        assert stack.receiver.count == 3
        statuses = [(await stack.delivery(e)).status for e in events]
        assert statuses.count(pb.DELIVERY_STATUS_SUCCEEDED) == 3
        assert silent.accepted == accepted  # nothing more went to the silent socket
        assert (await stack.endpoint(ep)).status == pb.ENDPOINT_STATUS_ENABLED
    finally:
        silent.stop()


OPS = ["endpoint.failing", "endpoint.disabled", "endpoint.recovered", "delivery.exhausted"]
DELAYS = [dt.timedelta(minutes=m) for m in (1, 5, 30, 120, 360, 1440)]


async def test_operational_events_reach_the_accounts_other_endpoints_never_the_failing_one(
    stack: Stack,
) -> None:
    failing = {"on": True}
    stack.receiver.responder = lambda r: 503 if r.path == "/a" and failing["on"] else 200
    sub = await stack.stub.RegisterEndpoint(
        pb.RegisterEndpointRequest(**SCOPE, url=stack.receiver.url("/a"), events=["booking.confirmed", *OPS])
    )
    a = sub.endpoint.id
    await stack.stub.RegisterEndpoint(
        pb.RegisterEndpointRequest(**SCOPE, url=stack.receiver.url("/b"), events=OPS)
    )
    await stack.publish()
    await stack.publish()  # a backlog failing together: one event per level, not one per delivery
    assert stack.app.notices is not None

    async def step(at: dt.datetime) -> None:
        await stack.run_at(at)
        await stack.app.notices.publish_pending()  # type: ignore[union-attr]
        await stack.run_at(at)  # what was published is due now

    due = T0
    for delay in [*DELAYS, None]:
        await step(due)
        if delay is not None:
            due += delay
    got = stack.receiver.received()
    assert {r.path for r in got if json.loads(r.body)["type"] in OPS} == {"/b"}  # never to /a itself
    ops = [json.loads(r.body) for r in got if r.path == "/b"]
    assert [(e["type"], e["data"].get("thresholdPercent")) for e in ops[:2]] == [
        ("endpoint.failing", 50),
        ("endpoint.failing", 90),
    ]
    assert [e["data"]["attemptsFailed"] for e in ops[:2]] == [4, 6]
    assert sorted(e["type"] for e in ops[2:]) == [
        "delivery.exhausted",
        "delivery.exhausted",
        "endpoint.disabled",
    ]
    assert all(e["data"]["endpointId"] == a and e["account"] == ACCT for e in ops)
    # Fixed, re-enabled, recovered: its next 2xx is announced once.
    failing["on"] = False
    await stack.stub.EnableEndpoint(pb.EnableEndpointRequest(**SCOPE, endpoint_id=a))
    await stack.stub.RecoverEndpoint(pb.RecoverEndpointRequest(**SCOPE, endpoint_id=a))
    await step(due + MIN)
    ops = [json.loads(r.body) for r in stack.receiver.received() if r.path == "/b"]
    assert [e["type"] for e in ops[5:]] == ["endpoint.recovered"]


async def test_breaker_in_the_running_worker_holds_first_attempts_then_lets_them_through(
    tmp_path: pathlib.Path,
) -> None:
    """The pipelined worker (real clock): an endpoint taking one send at a time that never answers opens
    its breaker after two timeouts; its other deliveries are left unclaimed, unsent and uncounted, probes
    go one at a time; once the endpoint answers, they all go at once."""
    receiver, ca = trusted_receiver(tmp_path)
    silent = Silent()
    config = Config(
        database=f"sqlite+aiosqlite:///{tmp_path / 'w.db'}",
        listen="127.0.0.1:0",
        policy=Policy(allow_private=True),
        ca_bundle=str(ca),
        delivery_timeout=0.2,
        worker=WorkerConfig(per_endpoint=1, breaker_threshold=2, breaker_interval=0.5, poll_seconds=0.05),
    )
    app = await run_server(config)
    s = Stack(app, app.service.clock, receiver)  # type: ignore[arg-type]
    try:
        ep = await s.register(silent.url())
        events = [await s.publish() for _ in range(6)]
        breaker = app.worker.breakers
        deadline = asyncio.get_running_loop().time() + 10
        while breaker.state(ep).failures < 3:  # opened after two, then a probe failed too
            assert asyncio.get_running_loop().time() < deadline, breaker.state(ep)
            await asyncio.sleep(0.02)
        # Nothing counted but what was sent: the attempts committed are the sends the breaker saw, once the
        # storage cycle has recorded the last of them (a loaded machine lags it behind the breaker).
        while True:
            counts = [(await s.delivery(e)).attempt_count for e in events]
            sent = breaker.state(ep).failures
            assert sum(counts) <= sent, (counts, sent)
            if sum(counts) == sent:
                break
            assert asyncio.get_running_loop().time() < deadline, (counts, sent)
            await asyncio.sleep(0.02)
        assert counts.count(0) >= 2  # first attempts waiting, unsent
        await s.stub.UpdateEndpoint(
            pb.UpdateEndpointRequest(
                **SCOPE,
                endpoint_id=ep,
                update_mask=field_mask_pb2.FieldMask(paths=["url"]),
                url=receiver.url(),
            )
        )
        # The next probe reaches the receiver and closes the breaker; every first attempt follows.
        got = await receiver.wait_for(counts.count(0))
        assert len({json.loads(r.body)["id"] for r in got}) == len(got)
        assert breaker.state(ep).state is State.CLOSED
    finally:
        await s.channel.close()
        await app.stop(0)
        receiver.stop()
        silent.stop()
