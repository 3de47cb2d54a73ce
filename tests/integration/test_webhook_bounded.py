"""Receivers that answer without end, over real sockets: one that drips its answer a byte a second, one
that answers 200 with a chunked body that never ends. Reproductions first: each fails if its bound is
missing (no body cap: the endless body is read until the attempt times out; no attempt timeout: the drip
is waited for to the end, about 70 s, and the test's own deadline fails it). Then the running worker: a
crowd of both does not hold up healthy endpoints of the same account or of another one."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import httpx
import pytest

from tests.support import event_data
from travel.webhooks.v1 import webhooks_pb2 as pb
from travel.webhooks.v1 import webhooks_pb2_grpc
from webhookd import Outcome, Policy
from webhookd._delivery import WorkerConfig
from webhookd._http import MAX_BODY_READ, FastTransport
from webhookd._sender import RESPONSE_KEEP, Sender, SendResult
from webhookd._server import Config, run_server
from webhookd.testing import Hostile, Receiver

DEV = Policy(allow_http=True, allow_private=True)
LIVE = pb.ENVIRONMENT_LIVE
TIMEOUT = 20.0  # the worker's attempt timeout in the crowd test: healthy deliveries must land long before


@pytest.fixture
def drip() -> Iterator[Hostile]:
    h = Hostile("drip", every=1.0).start()
    yield h
    h.stop()


@pytest.fixture
def endless() -> Iterator[Hostile]:
    h = Hostile("endless").start()
    yield h
    h.stop()


async def _until(check: Callable[[], bool], within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


async def _send(url: str, attempt_timeout: float) -> tuple[SendResult, FastTransport]:
    transport = FastTransport(DEV)
    async with httpx.AsyncClient(transport=transport) as client:
        sender = Sender(client, timeout=attempt_timeout, direct=transport)
        # The test's own deadline: a missing bound fails here instead of hanging the suite.
        result = await asyncio.wait_for(
            sender.send(url, b"{}", ["whsec_x"], "evt_1", dt.datetime.now(dt.UTC)), attempt_timeout + 5
        )
    return result, transport


async def test_an_endless_chunked_body_is_read_to_the_cap_then_the_connection_dropped(
    endless: Hostile,
) -> None:
    result, transport = await _send(endless.url(), attempt_timeout=10.0)
    # The answer counts (a 200 came); without the cap the send would read on until its timeout.
    assert (result.result, result.status) == (Outcome.SUCCEEDED, 200), result.error
    assert result.body == "x" * RESPONSE_KEEP
    await _until(lambda: endless.open == 0)  # the worker closed the connection, not the receiver
    assert endless.requests == 1
    # It wrote past the cap; what it got out is bounded by the cap and the sockets' buffers.
    assert MAX_BODY_READ < endless.sent < 64 * MAX_BODY_READ
    assert not any(transport._idle.values())  # never pooled for the next delivery


async def test_a_dripping_answer_is_cut_at_the_attempt_timeout(drip: Hostile) -> None:
    result, _transport = await _send(drip.url(), attempt_timeout=1.5)
    assert (result.result, result.status) == (Outcome.TIMEOUT, 0)
    assert result.error == "no response within 1.5 s"
    await _until(lambda: drip.open == 0)  # dropped, not left dripping
    assert 0 < drip.sent < 10


class _Client:
    def __init__(self, port: int) -> None:
        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        self.stub = webhooks_pb2_grpc.WebhookServiceStub(self.channel)

    async def register(self, acct: str, url: str) -> str:
        reg = await self.stub.RegisterEndpoint(
            pb.RegisterEndpointRequest(
                account_id=acct, environment=LIVE, url=url, events=["booking.confirmed"]
            )
        )
        return str(reg.endpoint.id)

    async def publish(self, acct: str, i: int) -> None:
        data = event_data("booking.confirmed", booking=f"bk_{i}")
        await self.stub.PublishEvent(
            pb.PublishEventRequest(
                account_id=acct, environment=LIVE, type="booking.confirmed", state="confirmed", data=data
            )
        )

    async def deliveries(self, acct: str, endpoint_id: str) -> list[Any]:
        page = await self.stub.ListDeliveries(
            pb.ListDeliveriesRequest(account_id=acct, environment=LIVE, endpoint_id=endpoint_id)
        )
        return list(page.deliveries)


async def test_drips_and_endless_bodies_do_not_hold_up_healthy_endpoints(
    db_url: str, drip: Hostile, endless: Hostile
) -> None:
    healthy = Receiver(None).start()
    app = await run_server(
        Config(
            database=db_url,
            listen="127.0.0.1:0",
            policy=DEV,
            delivery_timeout=TIMEOUT,
            worker=WorkerConfig(lease_seconds=TIMEOUT * 3),
        )
    )
    c = _Client(app.port)
    try:
        endless_ids = []
        for i in range(5):
            await c.register("acct_hostile", drip.url(f"/drip/{i}"))
            endless_ids.append(await c.register("acct_hostile", endless.url(f"/endless/{i}")))
        await c.register("acct_hostile", healthy.url("/same"))
        await c.register("acct_other", healthy.url("/other"))
        for i in range(3):
            await c.publish("acct_hostile", i)
        await _until(lambda: drip.requests >= 5)  # the drips are under way
        for i in range(3):
            await c.publish("acct_other", i)
        await healthy.wait_for(6, within=10)
        assert sorted(r.path for r in healthy.received()) == ["/other"] * 3 + ["/same"] * 3
        # ... while the drips are still dripping: none was waited for, none has timed out yet.
        assert drip.open > 0
        # The endless bodies were each read to the cap and answered the delivery (a 200 came).
        for ep in endless_ids:
            for _ in range(500):
                ds = await c.deliveries("acct_hostile", ep)
                if len(ds) == 3 and all(d.status == pb.DELIVERY_STATUS_SUCCEEDED for d in ds):
                    break
                await asyncio.sleep(0.02)
            assert [d.status for d in ds] == [pb.DELIVERY_STATUS_SUCCEEDED] * 3
        assert drip.open > 0
    finally:
        await c.channel.close()
        await app.stop(0)
        healthy.stop()
