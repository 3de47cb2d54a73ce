"""Every destination type keeps the HTTP contract (docs/webhooks.md "Destinations"): one test per part of
it, parametrised over the types (``destination_targets.TARGETS``: http, amqp over the real RabbitMQ, nats
over the real NATS JetStream; a new type adds a target there).

- delivered, signed as a webhook is; ordering per booking (a booking's later event waits for its refused
  earlier one); retries by the spec's schedule (a FakeClock, not a microsecond early) while the target
  refuses honestly (HTTP 503, a RabbitMQ exchange that does not exist, a NATS subject no stream
  captures); disabled after the last retry with the e-mail (real SMTP) and the endpoint.disabled
  operational event; recovered once the target takes deliveries again; a failed attempt resent by hand.
- 0 lost across a SIGKILL of a webhookd process that is delivering a stream of events.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import pathlib
import ssl
from collections.abc import AsyncIterator, Iterator
from email import message_from_bytes
from typing import Any

import grpc
import pytest
from aiosmtpd.controller import Controller
from google.protobuf import timestamp_pb2

from svckit.clock import FakeClock
from svckit.smtp import SmtpSettings
from tests.e2e.destination_targets import TARGETS, Got, Target
from tests.support import ServiceProcess, event_data, free_port
from travel.webhooks.v1 import webhooks_pb2 as pb
from travel.webhooks.v1 import webhooks_pb2_grpc
from webhookd import Policy, verify
from webhookd._server import Config, Webhookd, run_server

LIVE = pb.ENVIRONMENT_LIVE
ACCT = "acct_dest"
SCOPE: dict[str, Any] = {"account_id": ACCT, "environment": LIVE}
T0 = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
MIN = dt.timedelta(minutes=1)
DELAYS = [dt.timedelta(minutes=m) for m in (1, 5, 30, 120, 360, 1440)]
KINDS = ["booking.confirmed", "booking.modified", "booking.cancelled", "booking.failed"]


class Inbox:
    def __init__(self) -> None:
        self.messages: list[Any] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append(message_from_bytes(envelope.content))
        return "250 OK"


@pytest.fixture
def smtp() -> Iterator[tuple[Inbox, int]]:
    port = free_port()
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    yield inbox, port
    controller.stop()


@pytest.fixture(params=sorted(TARGETS))
async def target(request: pytest.FixtureRequest, tls: tuple[ssl.SSLContext, str]) -> AsyncIterator[Target]:
    made = TARGETS[request.param]()
    await made.open(tls)
    yield made
    await made.close()


@pytest.fixture
async def stack(
    sqlite_url: str, tls: tuple[ssl.SSLContext, str], smtp: tuple[Inbox, int], target: Target
) -> AsyncIterator[tuple[Webhookd, Any, FakeClock]]:
    clock = FakeClock(T0)
    config = Config(
        database=sqlite_url,
        listen="127.0.0.1:0",
        policy=Policy(allow_private=True),
        ca_bundle=tls[1],
        smtp=SmtpSettings("127.0.0.1", smtp[1], "webhooks@svc.test"),
        alert_emails=["ops@partner.test"],
        delivery_timeout=5.0,
    )
    app = await run_server(config, clock=clock, start_worker=False)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.port}")
    yield app, webhooks_pb2_grpc.WebhookServiceStub(channel), clock
    await channel.close()
    await app.stop(0)


async def _publish(stub: Any, kind: str, booking: str) -> str:
    resp = await stub.PublishEvent(
        pb.PublishEventRequest(**SCOPE, type=kind, data=event_data(kind, booking=booking))
    )
    return str(resp.event.id)


async def _delivery(stub: Any, event_id: str) -> Any:
    (d,) = (await stub.ListDeliveries(pb.ListDeliveriesRequest(**SCOPE, event_id=event_id))).deliveries
    return d


async def _run_at(app: Webhookd, clock: FakeClock, when: dt.datetime) -> int:
    """Everything due at ``when`` sent (ordered deliveries released by a success go in the next round)."""
    clock.set(when)
    total = 0
    while sent := await app.worker.run_once():
        total += sent
    return total


def _ids(got: list[Got]) -> list[str]:
    return [g.event_id for g in got]


async def test_destination_keeps_the_webhook_contract(
    stack: tuple[Webhookd, Any, FakeClock], target: Target, smtp: tuple[Inbox, int]
) -> None:
    app, stub, clock = stack
    reg = await stub.RegisterEndpoint(
        pb.RegisterEndpointRequest(
            **SCOPE, events=KINDS, ordering=pb.DELIVERY_ORDER_PER_RESOURCE, **target.registration()
        )
    )
    ep = reg.endpoint.id
    assert reg.endpoint.type == pb.DestinationType.Value(f"DESTINATION_TYPE_{target.kind.upper()}")
    assert "guest" not in str(reg.endpoint.amqp.password) and not reg.endpoint.amqp.password
    # Ordering per booking: A's first event is refused; A's next waits for it while B's goes out.
    a1 = await _publish(stub, "booking.confirmed", "bk_a")
    assert await _run_at(app, clock, T0) == 1
    (refused,) = (await stub.ListAttempts(pb.ListAttemptsRequest(**SCOPE, event_id=a1))).attempts
    assert (
        refused.outcome == pb.ATTEMPT_OUTCOME_HTTP_ERROR and refused.response_status == target.refused_status
    )
    assert refused.error
    await target.accept(True)
    a2 = await _publish(stub, "booking.modified", "bk_a")
    b1 = await _publish(stub, "booking.confirmed", "bk_b")
    await _run_at(app, clock, T0)
    assert _ids(await target.received()) == [b1]
    await _run_at(app, clock, T0 + MIN)
    assert _ids(await target.received()) == [b1, a1, a2]
    for got in await target.received():
        verify(got.body, got.headers["x-service-signature"], reg.signing_secret, clock.now())
        assert got.headers["x-service-event-id"] == got.event_id
    # The retry schedule, attempt by attempt, while the target refuses; then disabled.
    await target.accept(False)
    due = T0 + 2 * MIN
    clock.set(due)
    c1 = await _publish(stub, "booking.confirmed", "bk_c")
    for attempt, delay in enumerate([*DELAYS, None], start=1):
        clock.set(due - dt.timedelta(microseconds=1))
        assert await app.worker.run_once() == 0
        clock.set(due)
        assert await app.worker.run_once() == 1
        d = await _delivery(stub, c1)
        assert d.attempt_count == attempt
        if delay is not None:
            assert d.status == pb.DELIVERY_STATUS_PENDING
            assert d.next_attempt_at.ToDatetime(dt.UTC) == due + delay, attempt
            due += delay
        else:
            assert d.status == pb.DELIVERY_STATUS_FAILED
    atts = (await stub.ListAttempts(pb.ListAttemptsRequest(**SCOPE, event_id=c1))).attempts
    assert [a.attempt_number for a in atts] == [7, 6, 5, 4, 3, 2, 1]
    assert {(a.outcome, a.response_status) for a in atts} == {
        (pb.ATTEMPT_OUTCOME_HTTP_ERROR, target.refused_status)
    }
    endpoint = (await stub.GetEndpoint(pb.GetEndpointRequest(**SCOPE, endpoint_id=ep))).endpoint
    assert endpoint.status == pb.ENDPOINT_STATUS_DISABLED and "7 attempts" in endpoint.disabled_reason
    inbox = smtp[0]
    disabled_mail = f"Webhook endpoint {ep} disabled after repeated delivery failures"
    for _ in range(500):
        subjects = [" ".join(m["Subject"].split()) for m in inbox.messages]
        ops = (await stub.ListEvents(pb.ListEventsRequest(**SCOPE, types=["endpoint.disabled"]))).events
        if disabled_mail in subjects and ops:
            break
        await asyncio.sleep(0.02)
    assert disabled_mail in subjects
    assert [e.data["endpointId"] for e in ops] == [ep]
    # Both name where its deliveries went (a broker endpoint has no URL), never a credential.
    assert [e.data["url"] for e in ops] == [target.shown()]
    (mail,) = [m for m in inbox.messages if " ".join(m["Subject"].split()) == disabled_mail]
    text = "".join(
        part.get_payload(decode=True).decode()
        for part in mail.walk()
        if part.get_content_type() == "text/plain"
    )
    assert target.shown() in " ".join(text.split()) and "guest" not in text  # the broker's user, password
    # Recovered: the target takes deliveries again, the endpoint is enabled, what failed goes out.
    await target.accept(True)
    await stub.EnableEndpoint(pb.EnableEndpointRequest(**SCOPE, endpoint_id=ep))
    since = timestamp_pb2.Timestamp()
    since.FromDatetime(T0 + MIN)
    assert (
        await stub.RecoverEndpoint(pb.RecoverEndpointRequest(**SCOPE, endpoint_id=ep, since=since))
    ).recovered_count == 1
    await _run_at(app, clock, due + MIN)
    assert (await _delivery(stub, c1)).status == pb.DELIVERY_STATUS_SUCCEEDED
    assert _ids(await target.received()).count(c1) == 1
    # A failed attempt resent by hand: one more attempt, manual, succeeded.
    clock.set(due + 2 * MIN)
    resent = await stub.ResendAttempt(pb.ResendAttemptRequest(**SCOPE, attempt_id=atts[-1].id))
    assert resent.delivery.status == pb.DELIVERY_STATUS_SUCCEEDED
    (last,) = [
        a
        for a in (await stub.ListAttempts(pb.ListAttemptsRequest(**SCOPE, event_id=c1))).attempts
        if a.manual
    ]
    assert last.outcome == pb.ATTEMPT_OUTCOME_SUCCEEDED
    # The target holds it once more, unless it deduplicates on the event id (NATS: the ack says so).
    assert _ids(await target.received()).count(c1) == (1 if target.dedups else 2)
    if target.dedups:
        assert "duplicate" in last.response_body


def _webhookd(db_url: str, target: Target | None) -> ServiceProcess:
    """A webhookd process; with ``target``, the flags it needs (polling needs none)."""
    return ServiceProcess(
        "webhookd",
        [
            "--listen", "127.0.0.1:0",
            "--metrics-listen", "",
            "--database", db_url,
            "--allow-private-targets",
            "--delivery-timeout", "3",
            "--lease-seconds", "5",
            *(target.process_args() if target is not None else []),
        ],
    )  # fmt: skip


async def _publish_many(grpc_target: str, n: int, accepted: list[str], start: int = 0) -> int:
    failures = 0
    async with grpc.aio.insecure_channel(grpc_target) as channel:
        stub = webhooks_pb2_grpc.WebhookServiceStub(channel)
        for i in range(start, start + n):
            try:
                resp = await stub.PublishEvent(
                    pb.PublishEventRequest(
                        **SCOPE,
                        type="booking.confirmed",
                        state="confirmed",
                        data=event_data("booking.confirmed", booking=f"bk_{i}"),
                        idempotency_key=f"pub-{i}",
                    ),
                    timeout=5,
                )
            except grpc.aio.AioRpcError:
                failures += 1
                continue
            accepted.append(resp.event.id)
    return failures


async def test_destination_loses_nothing_across_a_sigkill(
    sqlite_url: str, target: Target, tmp_path: pathlib.Path
) -> None:
    await target.accept(True)
    proc = _webhookd(sqlite_url, target).start(tmp_path / "webhookd-1.log")
    accepted: list[str] = []
    try:
        async with grpc.aio.insecure_channel(proc.grpc_target) as channel:
            reg = await webhooks_pb2_grpc.WebhookServiceStub(channel).RegisterEndpoint(
                pb.RegisterEndpointRequest(**SCOPE, events=["booking.confirmed"], **target.registration())
            )
        publisher = asyncio.create_task(_publish_many(proc.grpc_target, 300, accepted))
        while len(accepted) < 100:
            assert not publisher.done(), proc.logs()[-2000:]
            await asyncio.sleep(0.01)
        proc.kill()  # SIGKILL: no shutdown code runs
        assert await publisher > 0  # publishing went on while the process was dead
        proc = _webhookd(sqlite_url, target).start(tmp_path / "webhookd-2.log")
        await _publish_many(proc.grpc_target, 20, accepted, start=1000)
        deadline = asyncio.get_running_loop().time() + 60
        while not set(accepted) <= set(_ids(await target.received())):
            assert asyncio.get_running_loop().time() < deadline, proc.logs()[-2000:]
            await asyncio.sleep(0.1)
        got = await target.received()
        missing = set(accepted) - set(_ids(got))
        assert not missing, f"{len(missing)} accepted events never delivered"
        for g in got[-20:]:
            verify(g.body, g.headers["x-service-signature"], reg.signing_secret, dt.datetime.now(dt.UTC))
    finally:
        proc.kill()


# Polling (docs/webhooks.md "Polling"): nothing is pushed, so the contract holds where it applies.
# Applies: delivered (polled, committed, exactly the stored envelope); ordering per booking, across
# consumers; "retry" = a lease that runs out uncommitted (the batch comes again, the lease an attempt of
# the log); recovered (what failed, here by the retention, comes back to the queue); 0 lost across a SIGKILL.
# Does not apply, and the test shows what happens instead: the retry schedule and its times (the consumer
# sets the pace), disabling after the last retry with its e-mail and endpoint.disabled (a polling
# endpoint is never disabled by leases running out), a manual resend (refused: nothing is sent), the
# signature (a polled event comes in the answer to the consumer's own authenticated request).


async def _poll(stub: Any, ep: str, limit: int = 10, lease: int = 30) -> tuple[list[str], str]:
    got = await stub.PollEndpoint(
        pb.PollEndpointRequest(**SCOPE, endpoint_id=ep, limit=limit, lease_seconds=lease)
    )
    return [e.envelope_json and json.loads(e.envelope_json)["id"] for e in got.events], got.cursor


async def _commit(stub: Any, ep: str, cursor: str) -> int:
    done = await stub.CommitPoll(pb.CommitPollRequest(**SCOPE, endpoint_id=ep, cursor=cursor))
    return int(done.committed_count)


@pytest.fixture
async def polling_stack(
    sqlite_url: str, smtp: tuple[Inbox, int]
) -> AsyncIterator[tuple[Webhookd, Any, FakeClock]]:
    clock = FakeClock(T0)
    config = Config(
        database=sqlite_url,
        listen="127.0.0.1:0",
        smtp=SmtpSettings("127.0.0.1", smtp[1], "webhooks@svc.test"),
        alert_emails=["ops@partner.test"],
    )
    app = await run_server(config, clock=clock, start_worker=False)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.port}")
    yield app, webhooks_pb2_grpc.WebhookServiceStub(channel), clock
    await channel.close()
    await app.stop(0)


async def test_polling_keeps_the_contract_where_it_applies(
    polling_stack: tuple[Webhookd, Any, FakeClock], smtp: tuple[Inbox, int]
) -> None:
    app, stub, clock = polling_stack
    reg = await stub.RegisterEndpoint(
        pb.RegisterEndpointRequest(
            **SCOPE, events=KINDS, ordering=pb.DELIVERY_ORDER_PER_RESOURCE, type=pb.DESTINATION_TYPE_POLLING
        )
    )
    ep = reg.endpoint.id
    assert reg.endpoint.type == pb.DESTINATION_TYPE_POLLING and not reg.endpoint.url
    # Delivered, in order per booking across two consumers; the worker never sends any of it.
    a1 = await _publish(stub, "booking.confirmed", "bk_a")
    a2 = await _publish(stub, "booking.modified", "bk_a")
    b1 = await _publish(stub, "booking.confirmed", "bk_b")
    assert await _run_at(app, clock, T0) == 0
    first, c_first = await _poll(stub, ep, limit=1)
    second, c_second = await _poll(stub, ep)
    assert first == [a1] and second == [b1]  # bk_a's next event waits for its leased head
    assert await _commit(stub, ep, c_second) == 1 and await _commit(stub, ep, c_first) == 1
    third, c_third = await _poll(stub, ep)
    assert third == [a2] and await _commit(stub, ep, c_third) == 1
    got = await stub.PollEndpoint(pb.PollEndpointRequest(**SCOPE, endpoint_id=ep))
    assert not got.events and not got.cursor
    event = (await stub.GetEvent(pb.GetEventRequest(**SCOPE, event_id=a1))).event
    assert json.loads(event.envelope_json)["id"] == a1
    assert (await _delivery(stub, a1)).status == pb.DELIVERY_STATUS_SUCCEEDED
    # "Retry": a lease that runs out uncommitted gives the batch to the next poll, not a moment early.
    c1 = await _publish(stub, "booking.confirmed", "bk_c")
    for attempt in range(1, 11):  # ten leases run out: still offered, never disabled
        ids, cursor = await _poll(stub, ep, lease=30)
        assert ids == [c1], attempt
        clock.set(clock.now() + dt.timedelta(seconds=30) - dt.timedelta(microseconds=1))
        assert (await _poll(stub, ep))[0] == []
        clock.set(clock.now() + dt.timedelta(microseconds=1))
        assert (await _delivery(stub, c1)).attempt_count == attempt
    with pytest.raises(grpc.aio.AioRpcError) as late:
        await _commit(stub, ep, cursor)
    assert "lease ran out" in str(late.value.details())
    assert (await _poll(stub, ep))[0] == [c1]  # the 11th lease writes the 10th's end into the log
    atts = (await stub.ListAttempts(pb.ListAttemptsRequest(**SCOPE, event_id=c1))).attempts
    assert [a.attempt_number for a in atts] == list(range(10, 0, -1))
    assert {a.outcome for a in atts} == {pb.ATTEMPT_OUTCOME_TIMEOUT}
    endpoint = (await stub.GetEndpoint(pb.GetEndpointRequest(**SCOPE, endpoint_id=ep))).endpoint
    assert endpoint.status == pb.ENDPOINT_STATUS_ENABLED
    ops = (await stub.ListEvents(pb.ListEventsRequest(**SCOPE, types=["endpoint.disabled"]))).events
    assert not ops and not smtp[0].messages
    # A manual resend is refused: nothing is sent to a polling endpoint.
    with pytest.raises(grpc.aio.AioRpcError) as resend:
        await stub.ResendAttempt(pb.ResendAttemptRequest(**SCOPE, attempt_id=atts[0].id))
    assert "polling" in str(resend.value.details())
    # Recovered: uncommitted past the retention, it fails; RecoverEndpoint brings it back to the queue.
    now = clock.now()
    assert await app.repo.polls.expire(now + dt.timedelta(seconds=1), now) == 1
    assert (await _delivery(stub, c1)).status == pb.DELIVERY_STATUS_FAILED
    since = timestamp_pb2.Timestamp()
    since.FromDatetime(T0)
    recovered = await stub.RecoverEndpoint(pb.RecoverEndpointRequest(**SCOPE, endpoint_id=ep, since=since))
    assert recovered.recovered_count == 1
    ids, cursor = await _poll(stub, ep)
    assert ids == [c1] and await _commit(stub, ep, cursor) == 1
    assert (await _delivery(stub, c1)).status == pb.DELIVERY_STATUS_SUCCEEDED


async def test_polling_loses_nothing_across_a_sigkill(sqlite_url: str, tmp_path: pathlib.Path) -> None:
    proc = _webhookd(sqlite_url, None).start(tmp_path / "webhookd-1.log")
    accepted: list[str] = []
    committed: list[str] = []
    where = [proc.grpc_target]
    try:
        async with grpc.aio.insecure_channel(proc.grpc_target) as channel:
            reg = await webhooks_pb2_grpc.WebhookServiceStub(channel).RegisterEndpoint(
                pb.RegisterEndpointRequest(
                    **SCOPE, events=["booking.confirmed"], type=pb.DESTINATION_TYPE_POLLING
                )
            )
        ep = reg.endpoint.id
        stop = asyncio.Event()

        async def consumer() -> None:
            while not stop.is_set():
                try:
                    async with grpc.aio.insecure_channel(where[0]) as ch:
                        stub = webhooks_pb2_grpc.WebhookServiceStub(ch)
                        while not stop.is_set():
                            ids, cursor = await _poll(stub, ep, limit=20, lease=2)
                            if not ids:
                                await asyncio.sleep(0.05)
                                continue
                            await _commit(stub, ep, cursor)
                            committed.extend(ids)
                except grpc.aio.AioRpcError:
                    await asyncio.sleep(0.1)  # the process is dead or its lease ran out: poll again

        consuming = asyncio.create_task(consumer())
        publisher = asyncio.create_task(_publish_many(proc.grpc_target, 300, accepted))
        while len(accepted) < 100:
            assert not publisher.done(), proc.logs()[-2000:]
            await asyncio.sleep(0.01)
        proc.kill()  # SIGKILL, mid-stream: a leased batch may die uncommitted with it
        assert await publisher > 0
        proc = _webhookd(sqlite_url, None).start(tmp_path / "webhookd-2.log")
        where[0] = proc.grpc_target
        await _publish_many(proc.grpc_target, 20, accepted, start=1000)
        deadline = asyncio.get_running_loop().time() + 60
        while not set(accepted) <= set(committed):
            assert asyncio.get_running_loop().time() < deadline, proc.logs()[-2000:]
            await asyncio.sleep(0.1)
        stop.set()
        await consuming
        assert not set(accepted) - set(committed), "an accepted event was never polled"
    finally:
        proc.kill()
