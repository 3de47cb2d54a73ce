"""Failing alerts: an endpoint driven to 50 % of its road to being disabled (its 4th failed attempt, with a
FakeClock, real gRPC, a real HTTPS receiver) e-mails the account's people over real SMTP (aiosmtpd) with
the endpoint's portal page and the API calls that mend it; a second episode within the hour sends none."""

from __future__ import annotations

import asyncio
import datetime as dt
import re
import ssl
from collections.abc import AsyncIterator, Iterator
from email import message_from_bytes, policy
from typing import Any

import grpc
import pytest
import trustme
from aiosmtpd.controller import Controller

from svckit.clock import FakeClock
from svckit.smtp import SmtpSettings
from tests.support import event_data, free_port
from travel.webhooks.v1 import webhooks_pb2 as pb
from travel.webhooks.v1 import webhooks_pb2_grpc
from webhookd import Policy
from webhookd._server import Config, Webhookd, run_server
from webhookd.testing import Receiver

LIVE = pb.ENVIRONMENT_LIVE
ACCT = "acct_failing"
T0 = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
PORTAL = "https://portal.partner.test"
MINUTE = dt.timedelta(minutes=1)


class Inbox:
    def __init__(self) -> None:
        self.messages: list[tuple[list[str], Any]] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append(
            (sorted(envelope.rcpt_tos), message_from_bytes(envelope.content, policy=policy.default))
        )
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
async def setup(
    sqlite_url: str, smtp: tuple[Inbox, int], tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[Webhookd, Any, FakeClock, dict[str, Any]]]:
    ca = trustme.CA()
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(ctx)
    ca_path = tmp_path_factory.mktemp("ca") / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_path))
    failing: dict[str, Any] = {"on": True}
    receiver = Receiver(ctx, responder=lambda _r: 503 if failing["on"] else 200).start()
    clock = FakeClock(T0)
    config = Config(
        database=sqlite_url,
        listen="127.0.0.1:0",
        policy=Policy(allow_private=True),
        ca_bundle=str(ca_path),
        smtp=SmtpSettings("127.0.0.1", smtp[1], "webhooks@svc.test"),
        alert_emails=["ops@partner.test", "cto@partner.test"],
        portal_url=PORTAL,
        mail_retry_seconds=0.05,
    )
    app = await run_server(config, clock=clock, start_worker=False)
    failing["url"] = receiver.url()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.port}")
    yield app, webhooks_pb2_grpc.WebhookServiceStub(channel), clock, failing
    await channel.close()
    await app.stop(0)
    receiver.stop()


async def _mail(inbox: Inbox, count: int) -> list[tuple[list[str], Any]]:
    for _ in range(250):
        if len(inbox.messages) >= count:
            break
        await asyncio.sleep(0.02)
    return inbox.messages


async def _at(app: Webhookd, clock: FakeClock, t: dt.datetime) -> int:
    clock.set(t)
    return await app.worker.run_once()


async def _publish(stub: Any) -> None:
    await stub.PublishEvent(
        pb.PublishEventRequest(
            account_id=ACCT,
            environment=LIVE,
            type="booking.confirmed",
            state="confirmed",
            data=event_data("booking.confirmed"),
        )
    )


async def test_failing_at_50_emails_the_portal_link_once_within_the_hour(
    setup: tuple[Webhookd, Any, FakeClock, dict[str, Any]], smtp: tuple[Inbox, int]
) -> None:
    app, stub, clock, failing = setup
    inbox = smtp[0]
    reg = await stub.RegisterEndpoint(
        pb.RegisterEndpointRequest(
            account_id=ACCT, environment=LIVE, url=failing["url"], events=["booking.confirmed"]
        )
    )
    ep = reg.endpoint.id
    await _publish(stub)
    # Attempts 1-3 fail (T0, +1 min, +6 min): not yet half way, no e-mail.
    for t in (T0, T0 + MINUTE, T0 + 6 * MINUTE):
        assert await _at(app, clock, t) == 1
    await app.mailer.send_pending()
    assert inbox.messages == []
    # The 4th fails (+36 min): 50 %.
    assert await _at(app, clock, T0 + 36 * MINUTE) == 1
    ((rcpts, mail),) = await _mail(inbox, 1)
    assert rcpts == ["cto@partner.test", "ops@partner.test"]  # the disable e-mail's recipients
    assert mail["Subject"] == f"Webhook endpoint {ep} failing: 50 % of the way to being disabled"
    body = mail.get_content()
    links = re.findall(r"https?://\S+", body)
    assert f"{PORTAL}/live/webhooks/{ep}" in links
    assert f"POST /v1/webhooks/endpoints/{ep}/test" in body
    assert f"GET /v1/webhooks/attempts?endpoint={ep}" in body
    assert "503" in body and "whsec_" not in body
    assert "EnableEndpoint" not in body and "RecoverEndpoint" not in body
    # It recovers (a 2xx at +37 min), then fails again: a new event reaches 50 % at +37 + 36 min, within
    # the hour of the first e-mail: the event is published, the e-mail held back.
    failing["on"] = False
    await _publish(stub)
    assert await _at(app, clock, T0 + 37 * MINUTE) == 1
    failing["on"] = True
    await _publish(stub)
    t1 = T0 + 38 * MINUTE
    for t in (t1, t1 + MINUTE, t1 + 6 * MINUTE, t1 + 36 * MINUTE):
        assert await _at(app, clock, t) == 1
    assert app.notices is not None
    await app.notices.publish_pending()  # (the relay's own pass may be on its way too: one event still)
    events = await stub.ListEvents(pb.ListEventsRequest(account_id=ACCT, environment=LIVE))
    assert [e.type for e in events.events].count("endpoint.failing") == 2
    await asyncio.sleep(0.2)
    await app.mailer.send_pending()
    assert len(inbox.messages) == 1
