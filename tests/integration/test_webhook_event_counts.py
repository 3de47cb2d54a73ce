"""CountEvents: an account's events of one kind per UTC day (look-to-book's bookings), over real gRPC on
SQLite and PostgreSQL, with webhookd's clock walked across days."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from google.protobuf import timestamp_pb2

from svckit.clock import FakeClock
from svckit.errors import type_from_rpc_error
from tests.support import event_data
from travel.webhooks.v1 import webhooks_pb2 as pb
from travel.webhooks.v1 import webhooks_pb2_grpc
from webhookd import Policy
from webhookd._server import Config, run_server

LIVE, SANDBOX = pb.ENVIRONMENT_LIVE, pb.ENVIRONMENT_SANDBOX
START = dt.datetime(2026, 6, 1, 22, 0, tzinfo=dt.UTC)


def ts(when: dt.datetime) -> timestamp_pb2.Timestamp:
    out = timestamp_pb2.Timestamp()
    out.FromDatetime(when)
    return out


@pytest.fixture
async def running(db_url: str) -> AsyncIterator[tuple[webhooks_pb2_grpc.WebhookServiceStub, FakeClock]]:
    clock = FakeClock(START)
    app = await run_server(
        Config(database=db_url, listen="127.0.0.1:0", policy=Policy(allow_private=True)),
        clock=clock,
        start_worker=False,
    )
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.port}")
    try:
        yield webhooks_pb2_grpc.WebhookServiceStub(channel), clock
    finally:
        await channel.close()
        await app.stop(0)


async def publish(
    stub: webhooks_pb2_grpc.WebhookServiceStub, kind: str, acct: str = "acct_a", env: Any = LIVE
) -> None:
    await stub.PublishEvent(
        pb.PublishEventRequest(account_id=acct, environment=env, type=kind, data=event_data(kind))
    )


async def test_counts_one_kind_per_utc_day_per_account_and_environment(
    running: tuple[webhooks_pb2_grpc.WebhookServiceStub, FakeClock],
) -> None:
    stub, clock = running
    # June 1st 22:00: two bookings, a cancellation; another account's and a sandbox booking.
    await publish(stub, "booking.confirmed")
    await publish(stub, "booking.confirmed")
    await publish(stub, "booking.cancelled")
    await publish(stub, "booking.confirmed", acct="acct_b")
    await publish(stub, "booking.confirmed", env=SANDBOX)
    clock.advance(3 * 3600)  # June 2nd 01:00: one
    await publish(stub, "booking.confirmed")
    clock.advance(2 * 86400)  # June 4th 01:00: three (June 3rd has none)
    for _ in range(3):
        await publish(stub, "booking.confirmed")

    async def count(**kw: Any) -> list[tuple[str, int]]:
        req = pb.CountEventsRequest(
            account_id="acct_a",
            environment=LIVE,
            type="booking.confirmed",
            since=ts(START - dt.timedelta(days=1)),
        )
        for k, v in kw.items():
            if isinstance(v, dt.datetime):
                getattr(req, k).CopyFrom(ts(v))
            else:
                setattr(req, k, v)
        return [(d.day, d.count) for d in (await stub.CountEvents(req)).days]

    assert await count() == [("2026-06-01", 2), ("2026-06-02", 1), ("2026-06-04", 3)]
    assert await count(type="booking.cancelled") == [("2026-06-01", 1)]
    assert await count(account_id="acct_b") == [("2026-06-01", 1)]
    assert await count(environment=SANDBOX) == [("2026-06-01", 1)]
    # [since, until): June 2nd 01:00 exactly is out at the end, in at the start.
    at = START + dt.timedelta(hours=3)
    assert await count(until=at) == [("2026-06-01", 2)]
    assert await count(since=at) == [("2026-06-02", 1), ("2026-06-04", 3)]
    assert await count(account_id="acct_nobody") == []


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"type": "booking.nope"}, "type:"),
        ({"type": ""}, "type:"),
        ({"since": None}, "since:"),
        ({"since": START - dt.timedelta(days=40)}, "since:"),
        ({"until": START - dt.timedelta(days=2)}, "until:"),
        ({"account_id": ""}, "account_id"),
    ],
)
async def test_bad_requests_are_refused(
    running: tuple[webhooks_pb2_grpc.WebhookServiceStub, FakeClock],
    fields: dict[str, Any],
    message: str,
) -> None:
    stub, _clock = running
    req = pb.CountEventsRequest(
        account_id="acct_a",
        environment=LIVE,
        type="booking.confirmed",
        since=ts(START - dt.timedelta(days=1)),
    )
    for k, v in fields.items():
        if v is None:
            req.ClearField(k)  # type: ignore[arg-type]
        elif isinstance(v, dt.datetime):
            getattr(req, k).CopyFrom(ts(v))
        else:
            setattr(req, k, v)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.CountEvents(req)
    etype, text = type_from_rpc_error(info.value)
    assert etype == "invalid_request" and text.startswith(message), text
