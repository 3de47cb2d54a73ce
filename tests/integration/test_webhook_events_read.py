"""webhookd's ListEvents and GetEvent (the events API read back): the last 30 days only, newest first,
kinds and a created window, pages, and nothing of another account or environment -- on SQLite and
PostgreSQL, with a clock the test moves."""

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
ACCT = "acct_events1"
T0 = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)


def ts(when: dt.datetime) -> timestamp_pb2.Timestamp:
    out = timestamp_pb2.Timestamp()
    out.FromDatetime(when)
    return out


@pytest.fixture
async def wh(db_url: str) -> AsyncIterator[tuple[webhooks_pb2_grpc.WebhookServiceStub, FakeClock]]:
    clock = FakeClock(T0)
    app = await run_server(
        Config(database=db_url, listen="127.0.0.1:0", policy=Policy(allow_private=True)),
        clock=clock,
        start_worker=False,
    )
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
        yield webhooks_pb2_grpc.WebhookServiceStub(channel), clock
    await app.stop(0)


async def publish(stub: Any, kind: str, env: pb.Environment.ValueType = LIVE, acct: str = ACCT) -> pb.Event:
    resp = await stub.PublishEvent(
        pb.PublishEventRequest(account_id=acct, environment=env, type=kind, data=event_data(kind))
    )
    return resp.event  # type: ignore[no-any-return]


async def ids(stub: Any, **kw: Any) -> list[str]:
    resp = await stub.ListEvents(pb.ListEventsRequest(account_id=ACCT, environment=LIVE, **kw))
    return [e.id for e in resp.events]


async def test_list_and_get_events_of_the_last_30_days(wh: tuple[Any, FakeClock]) -> None:
    stub, clock = wh
    old = await publish(stub, "booking.confirmed")
    clock.advance(3600)
    a = await publish(stub, "booking.confirmed")
    clock.advance(60)
    b = await publish(stub, "payment.failed")
    clock.advance(60)
    c = await publish(stub, "apikey.revoked")
    await publish(stub, "booking.confirmed", env=SANDBOX)
    await publish(stub, "booking.confirmed", acct="acct_other")
    assert await ids(stub) == [c.id, b.id, a.id, old.id]
    assert await ids(stub, types=["booking.confirmed"]) == [a.id, old.id]
    assert await ids(stub, since=ts(T0 + dt.timedelta(seconds=3600))) == [c.id, b.id, a.id]
    assert await ids(stub, until=ts(T0 + dt.timedelta(seconds=3660))) == [a.id, old.id]
    # Pages of two, newest first, each token continuing where the last page stopped.
    first = await stub.ListEvents(pb.ListEventsRequest(account_id=ACCT, environment=LIVE, page_size=2))
    second = await stub.ListEvents(
        pb.ListEventsRequest(account_id=ACCT, environment=LIVE, page_size=2, page_token=first.next_page_token)
    )
    assert [e.id for e in first.events] == [c.id, b.id] and [e.id for e in second.events] == [a.id, old.id]
    assert second.next_page_token == ""
    got = await stub.GetEvent(pb.GetEventRequest(account_id=ACCT, environment=LIVE, event_id=b.id))
    assert got.event.envelope_json == b.envelope_json
    # 30 days after the first event it is gone from both; the later ones stay.
    clock.set(T0 + dt.timedelta(days=30, seconds=1))
    assert await ids(stub) == [c.id, b.id, a.id]
    assert await ids(stub, since=ts(T0 - dt.timedelta(days=90))) == [c.id, b.id, a.id]
    for event_id, acct, env in ((old.id, ACCT, LIVE), (a.id, "acct_other", LIVE), (a.id, ACCT, SANDBOX)):
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.GetEvent(pb.GetEventRequest(account_id=acct, environment=env, event_id=event_id))
        assert type_from_rpc_error(info.value)[0] == "not_found"


@pytest.mark.parametrize(
    "request_fields",
    [
        {"types": ["booking.exploded"]},
        {"since": ts(T0), "until": ts(T0)},
        {"page_token": "not-a-token"},
        {"page_size": -1},
    ],
)
async def test_bad_list_requests_are_invalid(
    wh: tuple[Any, FakeClock], request_fields: dict[str, Any]
) -> None:
    stub, _ = wh
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.ListEvents(pb.ListEventsRequest(account_id=ACCT, environment=LIVE, **request_fields))
    assert type_from_rpc_error(info.value)[0] == "invalid_request"
