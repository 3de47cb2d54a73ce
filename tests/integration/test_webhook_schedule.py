"""The whole retry schedule end to end with a FakeClock (no sleeping): real gRPC, a real HTTPS receiver,
a real SMTP server (aiosmtpd) for the disable alert; then held events, enable and recover; then purge."""

from __future__ import annotations

import asyncio
import datetime as dt
import ssl
from collections.abc import AsyncIterator, Iterator
from email import message_from_bytes
from typing import Any

import grpc
import pytest
import trustme
from aiosmtpd.controller import Controller
from google.protobuf import timestamp_pb2

from svckit.clock import FakeClock
from svckit.smtp import SmtpSettings
from tests.support import event_data, free_port
from travel.webhooks.v1 import webhooks_pb2 as pb
from travel.webhooks.v1 import webhooks_pb2_grpc
from webhookd import Policy, verify
from webhookd._server import Config, Webhookd, housekeeping, run_server
from webhookd.testing import Receiver

LIVE = pb.ENVIRONMENT_LIVE
ACCT = "acct_sched"
T0 = dt.datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=dt.UTC)
DELAYS = [dt.timedelta(minutes=m) for m in (1, 5, 30, 120, 360, 1440)]


class Inbox:
    def __init__(self) -> None:
        self.messages: list[Any] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append((list(envelope.rcpt_tos), message_from_bytes(envelope.content)))
        return "250 OK"


@pytest.fixture
def smtp() -> Iterator[tuple[Inbox, int]]:
    port = free_port()
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    yield inbox, port
    controller.stop()


@pytest.fixture
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[ssl.SSLContext, str]:
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(ctx)
    path = tmp_path_factory.mktemp("ca") / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return ctx, str(path)


@pytest.fixture
async def setup(
    db_url: str, tls: tuple[ssl.SSLContext, str], smtp: tuple[Inbox, int]
) -> AsyncIterator[tuple[Webhookd, Any, FakeClock, Receiver]]:
    failing = {"on": True}
    receiver = Receiver(tls[0], responder=lambda _r: 503 if failing["on"] else 200).start()
    receiver.failing = failing  # type: ignore[attr-defined]
    clock = FakeClock(T0)
    config = Config(
        database=db_url,
        listen="127.0.0.1:0",
        policy=Policy(allow_private=True),
        ca_bundle=tls[1],
        smtp=SmtpSettings("127.0.0.1", smtp[1], "webhooks@svc.test"),
        alert_emails=["ops@partner.test", "cto@partner.test"],
    )
    app = await run_server(config, clock=clock, start_worker=False)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.port}")
    yield app, webhooks_pb2_grpc.WebhookServiceStub(channel), clock, receiver
    await channel.close()
    await app.stop(0)
    receiver.stop()


async def _delivery(stub: Any, event_id: str) -> Any:
    (d,) = (
        await stub.ListDeliveries(
            pb.ListDeliveriesRequest(account_id=ACCT, environment=LIVE, event_id=event_id)
        )
    ).deliveries
    return d


async def test_schedule_disable_alert_hold_recover_purge(
    setup: tuple[Webhookd, Any, FakeClock, Receiver], smtp: tuple[Inbox, int]
) -> None:
    app, stub, clock, receiver = setup
    inbox = smtp[0]
    reg = await stub.RegisterEndpoint(
        pb.RegisterEndpointRequest(
            account_id=ACCT,
            environment=LIVE,
            url=receiver.url(),
            events=["booking.confirmed", "booking.failed"],
        )
    )
    ep_id = reg.endpoint.id
    pub = await stub.PublishEvent(
        pb.PublishEventRequest(
            account_id=ACCT,
            environment=LIVE,
            type="booking.confirmed",
            state="confirmed",
            data=event_data("booking.confirmed"),
        )
    )
    event_id = pub.event.id
    due = T0
    for attempt, delay in enumerate([*DELAYS, None], start=1):
        # Not a microsecond early.
        clock.set(due - dt.timedelta(microseconds=1))
        assert await app.worker.run_once() == 0
        clock.set(due)
        assert await app.worker.run_once() == 1
        got = await receiver.wait_for(attempt)
        verify(got[-1].body, got[-1].headers["x-service-signature"], reg.signing_secret, clock.now())
        d = await _delivery(stub, event_id)
        assert d.attempt_count == attempt
        if delay is not None:
            assert d.status == pb.DELIVERY_STATUS_PENDING
            assert d.next_attempt_at.ToDatetime(dt.UTC) == due + delay, attempt
            due += delay
        else:
            assert d.status == pb.DELIVERY_STATUS_FAILED and not d.HasField("next_attempt_at")
    assert due - T0 == sum(DELAYS, dt.timedelta())
    atts = (
        await stub.ListAttempts(pb.ListAttemptsRequest(account_id=ACCT, environment=LIVE, endpoint_id=ep_id))
    ).attempts
    assert [a.attempt_number for a in atts] == [7, 6, 5, 4, 3, 2, 1]
    assert all(a.outcome == pb.ATTEMPT_OUTCOME_HTTP_ERROR and a.response_status == 503 for a in atts)
    assert atts[0].response_body == "receiver says no" and "503" in atts[0].error
    ep = (
        await stub.GetEndpoint(pb.GetEndpointRequest(account_id=ACCT, environment=LIVE, endpoint_id=ep_id))
    ).endpoint
    assert ep.status == pb.ENDPOINT_STATUS_DISABLED and "7 attempts" in ep.disabled_reason
    # The alert e-mail reaches the admins over SMTP.
    # Before it, the failing e-mails at 50 % (4th attempt) and 90 % (6th), to the same people.
    for _ in range(300):
        if len(inbox.messages) >= 3:
            break
        await asyncio.sleep(0.02)
    subjects = [" ".join(m["Subject"].split()) for _r, m in inbox.messages]
    failing_50 = f"Webhook endpoint {ep_id} failing: 50 % of the way to being disabled"
    failing_90 = f"Webhook endpoint {ep_id} failing: 90 % of the way to being disabled"
    disabled = f"Webhook endpoint {ep_id} disabled after repeated delivery failures"
    # Exactly these three. The failing ones come through the notice relay, in their order; the disable
    # alert is written with the last result itself, so with this test's clock (hours of retries in
    # milliseconds) it may overtake the 90 % one, which in real time is sent hours before it.
    assert sorted(subjects) == sorted([failing_50, failing_90, disabled])
    assert subjects.index(failing_50) < subjects.index(failing_90)
    for rcpts, mail in inbox.messages:
        assert sorted(rcpts) == ["cto@partner.test", "ops@partner.test"]
        assert "whsec_" not in mail.get_payload()
    # While disabled, new events are kept (held), not sent.
    held = await stub.PublishEvent(
        pb.PublishEventRequest(
            account_id=ACCT,
            environment=LIVE,
            type="booking.failed",
            state="failed",
            data=event_data("booking.failed"),
        )
    )
    assert held.delivery_count == 1
    clock.set(due + dt.timedelta(hours=1))
    assert await app.worker.run_once() == 0
    assert (await _delivery(stub, held.event.id)).status == pb.DELIVERY_STATUS_HELD
    assert receiver.count == 7
    scope = {"account_id": ACCT, "environment": LIVE, "endpoint_id": ep_id}
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.RecoverEndpoint(pb.RecoverEndpointRequest(**scope))
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    # Fix, enable, recover since before the first event: both the failed and the held one go out.
    receiver.failing["on"] = False  # type: ignore[attr-defined]
    enabled = await stub.EnableEndpoint(pb.EnableEndpointRequest(**scope))
    assert enabled.endpoint.status == pb.ENDPOINT_STATUS_ENABLED and not enabled.endpoint.disabled_reason
    since = timestamp_pb2.Timestamp()
    since.FromDatetime(T0 - dt.timedelta(minutes=1))
    rec = await stub.RecoverEndpoint(pb.RecoverEndpointRequest(**scope, since=since))
    assert rec.recovered_count == 2
    assert await app.worker.run_once() == 2
    await receiver.wait_for(9)
    for eid in (event_id, held.event.id):
        assert (await _delivery(stub, eid)).status == pb.DELIVERY_STATUS_SUCCEEDED
    # Attempts are kept 30 days, then purged by the periodic housekeeping.
    assert (
        len((await stub.ListAttempts(pb.ListAttemptsRequest(account_id=ACCT, environment=LIVE))).attempts)
        == 9
    )
    clock.set(due + dt.timedelta(days=30, minutes=30))
    task = asyncio.create_task(housekeeping(app.repo, clock, app_config(app)))
    try:
        for _ in range(300):
            atts = (
                await stub.ListAttempts(pb.ListAttemptsRequest(account_id=ACCT, environment=LIVE))
            ).attempts
            if len(atts) == 2:
                break
            await asyncio.sleep(0.02)
    finally:
        task.cancel()
    # Attempts 1..7 (the last at `due`) are over 30 days old; the two recoveries (at due + 1 h) are not.
    assert sorted(a.event_id for a in atts) == sorted([event_id, held.event.id])
    assert all(a.outcome == pb.ATTEMPT_OUTCOME_SUCCEEDED for a in atts)


def app_config(app: Webhookd) -> Config:
    return Config(database="unused", stats_interval=0.05)
