"""Traffic alerts end to end over real processes' servers: authsvc's housekeeping judges the usage counts
(RecordUsageCounts, as an edge records them), the searches (ConsumeSearch) and the confirmed bookings
(booking.confirmed events in a real webhookd, counted with CountEvents); the events it queues reach
webhookd through the outbox relay, are stored as live events, and the account's people get one e-mail
each over real SMTP (aiosmtpd). Each alert is sent once per the rule's period; on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import datetime as dt
import pathlib
from collections.abc import AsyncIterator, Iterator
from email import message_from_bytes
from typing import Any

import grpc
import pytest
from aiosmtpd.controller import Controller
from google.protobuf import field_mask_pb2

from authsvc.testing import ACTOR, new_account, running_authsvc
from svckit.clock import FakeClock
from svckit.eventcheck import event_problem
from svckit.protos import struct_to_dict
from svckit.protos import timestamp as ts
from svckit.smtp import SmtpSettings
from svckit.usagecounts import BUCKETS, bucket_of
from tests.support import event_data, free_port, sqlite_url
from travel.auth.v1 import auth_pb2 as apb
from travel.webhooks.v1 import webhooks_pb2 as wpb
from travel.webhooks.v1 import webhooks_pb2_grpc
from webhookd import Policy
from webhookd._server import Config
from webhookd._server import run_server as run_webhookd

LIVE = apb.ENVIRONMENT_LIVE
ALERTED = "ops@partner.example"


class Inbox:
    def __init__(self) -> None:
        self.messages: list[Any] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append(message_from_bytes(envelope.content))
        return "250 OK"

    async def wait_for(self, count: int) -> list[Any]:
        for _ in range(500):
            if len(self.messages) >= count:
                return self.messages
            await asyncio.sleep(0.02)
        raise AssertionError(f"{len(self.messages)} e-mails arrived, not {count}")


@pytest.fixture
def smtp() -> Iterator[tuple[Inbox, int]]:
    port = free_port()
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    yield inbox, port
    controller.stop()


@pytest.fixture
async def hooks(
    tmp_path: pathlib.Path, smtp: tuple[Inbox, int]
) -> AsyncIterator[tuple[str, webhooks_pb2_grpc.WebhookServiceStub]]:
    app = await run_webhookd(
        Config(
            database=sqlite_url(tmp_path, "webhookd.db"),
            listen="127.0.0.1:0",
            policy=Policy(allow_private=True),
            smtp=SmtpSettings("127.0.0.1", smtp[1]),
            alert_emails=[ALERTED],
            mail_retry_seconds=0.2,
        )
    )
    target = f"127.0.0.1:{app.port}"
    try:
        async with grpc.aio.insecure_channel(target) as channel:
            yield target, webhooks_pb2_grpc.WebhookServiceStub(channel)
    finally:
        await app.stop(0)


def cell(account_id: str, at: dt.datetime, status: int, count: int, ms: int) -> apb.UsageCount:
    buckets = [0] * BUCKETS
    buckets[bucket_of(ms)] = count
    return apb.UsageCount(
        account_id=account_id,
        environment=LIVE,
        key_id="key_traffic",
        route="GET /v1/hotels/search",
        status=status,
        error_type="" if status < 400 else "service_unavailable",
        period_start=ts(at),
        count=count,
        latency_buckets=buckets,
        latency_sum_ms=ms * count,
    )


async def events_of(stub: webhooks_pb2_grpc.WebhookServiceStub, account_id: str, kind: str) -> list[Any]:
    got = await stub.ListEvents(
        wpb.ListEventsRequest(account_id=account_id, environment=wpb.ENVIRONMENT_LIVE, types=[kind])
    )
    return list(got.events)


async def wait_events(stub: Any, account_id: str, kind: str, count: int) -> list[Any]:
    for _ in range(500):
        found = await events_of(stub, account_id, kind)
        if len(found) >= count:
            return found
        await asyncio.sleep(0.02)
    raise AssertionError(f"no {kind} event reached webhookd")


async def test_anomaly_and_look_to_book_alerts_are_sent_once_per_period(
    db_url: str, smtp: tuple[Inbox, int], hooks: tuple[str, webhooks_pb2_grpc.WebhookServiceStub]
) -> None:
    inbox, _ = smtp
    target, stub = hooks
    now = dt.datetime.now(dt.UTC).replace(second=0, microsecond=0)
    hour = now.replace(minute=0) - dt.timedelta(hours=1)  # the last whole hour, the one judged
    clock = FakeClock(now - dt.timedelta(days=6))
    async with running_authsvc(
        db_url, webhookd=target, clock=clock, traffic_interval=0, outbox_poll_interval=0.05
    ) as (server, auth):
        alerts = server.traffic_alerts
        assert alerts is not None
        noisy = await new_account(auth, name="Noisy")
        quiet = await new_account(auth, name="Quiet")
        looker = await new_account(auth, allowance=10_000, name="Looker")
        await auth.UpdateAccount(
            apb.UpdateAccountRequest(
                account_id=looker.id,
                update_mask=field_mask_pb2.FieldMask(paths=["look_to_book_target"]),
                look_to_book_target=1500,
                actor=ACTOR,
            )
        )
        # Seven days of calm for both (100 requests an hour, 1 % errors, 40 ms); then the judged hour:
        # the noisy account's errors and latency jump, the quiet one's 1-of-2 failure is no anomaly.
        cells = []
        for h in range(1, 7 * 24 + 1):
            at = hour - dt.timedelta(hours=h)
            for acct in (noisy.id, quiet.id):
                cells += [cell(acct, at, 200, 99, 40), cell(acct, at, 503, 1, 40)]
        cells += [cell(noisy.id, hour, 200, 100, 900), cell(noisy.id, hour, 503, 60, 40)]
        cells += [cell(quiet.id, hour, 200, 1, 40), cell(quiet.id, hour, 503, 1, 40)]
        for i in range(0, len(cells), 5000):
            await auth.RecordUsageCounts(
                apb.RecordUsageCountsRequest(batch_id=f"b{i}", counts=cells[i : i + 5000])
            )
        # Look-to-book: 3,000 searches a day for 7 days, 5 bookings today: 4,200:1 against 1,500:1.
        for day in range(7):
            for _ in range(3):  # at most 1,000 a call
                await auth.ConsumeSearch(
                    apb.ConsumeSearchRequest(account_id=looker.id, environment=LIVE, count=1000)
                )
            if day < 6:
                clock.advance(86400)
        clock._now = now  # today, now (the bookings below are webhookd's, at the real time)
        for n in range(5):
            await stub.PublishEvent(
                wpb.PublishEventRequest(
                    account_id=looker.id,
                    environment=wpb.ENVIRONMENT_LIVE,
                    type="booking.confirmed",
                    data=event_data("booking.confirmed", booking=f"bk_ltb_{n}"),
                )
            )

        assert await alerts.evaluate() == 3  # noisy: error_rate and latency; looker: look-to-book
        assert await alerts.evaluate() == 0  # once an hour, once a week

        anomalies = await wait_events(stub, noisy.id, "account.anomaly", 2)
        datas = sorted((struct_to_dict(e.data) for e in anomalies), key=lambda d: str(d["anomaly"]))
        assert [d["anomaly"] for d in datas] == ["error_rate", "latency"]
        assert (
            datas[0]["requests"] == 160 and datas[0]["errors"] == 60 and datas[0]["baselineErrorRate"] == 0.01
        )
        assert datas[1]["p95Ms"] == 1000 and datas[1]["baselineP95Ms"] == 50
        for d in datas:
            assert event_problem("account.anomaly", "anomalous", d) is None
        assert await events_of(stub, quiet.id, "account.anomaly") == []
        (ltb,) = await wait_events(stub, looker.id, "account.look_to_book_exceeded", 1)
        data = struct_to_dict(ltb.data)
        assert (data["searches"], data["bookings"], data["target"], data["searchesPerBooking"]) == (
            21_000,
            5,
            1500,
            4200,
        )

        mails = await inbox.wait_for(3)
        subjects = sorted(str(m["Subject"]) for m in mails)
        assert subjects == [
            "API latency jumped: p95 1,000 ms",
            "Errors jumped to 38% of your API requests",
            "Look-to-book 4,200:1 is past your target of 1,500:1",
        ]
        assert all(m["To"] == ALERTED for m in mails)

        # An hour on: the noisy account's anomalies may be sent again, if the new hour still has them; it
        # has no traffic, so nothing is sent. Six days on the look-to-book alert still waits its week.
        clock.advance(3600)
        assert await alerts.evaluate() == 0
        clock.advance(6 * 86400)
        assert await alerts.evaluate() == 0
        await asyncio.sleep(0.3)
        assert len(inbox.messages) == 3
