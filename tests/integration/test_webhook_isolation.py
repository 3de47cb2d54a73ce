"""Isolation (issue "webhook delivery beyond every anchor"): webhookd over real gRPC and real sockets, with
endpoints that accept the connection, read the request and never answer. Reproductions first: before the
worker's admission rule (``webhookd._admission``) a healthy receiver's deliveries waited behind the hanging
sends until they timed out. Bounds are generous (the point is "not starved", not speed): the hanging sends
last ``TIMEOUT`` seconds, and the healthy deliveries must all arrive while those are still hanging."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc
import pytest

from svckit.errors import type_from_rpc_error
from svckit.events import SANDBOX_DATA_MAX_BYTES
from tests.support import event_data
from travel.webhooks.v1 import webhooks_pb2 as pb
from travel.webhooks.v1 import webhooks_pb2_grpc
from webhookd import Policy, _service
from webhookd._delivery import WorkerConfig
from webhookd._events import SANDBOX_RETENTION
from webhookd._repository import DeliveryFilter
from webhookd._server import Config, Webhookd, run_server
from webhookd.testing import Receiver

LIVE, SANDBOX = pb.ENVIRONMENT_LIVE, pb.ENVIRONMENT_SANDBOX
TIMEOUT = 20.0  # the hanging sends' timeout: every healthy delivery must land long before it
BOUND = 5.0  # generous: today's worker makes them wait for TIMEOUT


class Hang:
    """A raw TCP server that accepts, reads everything and never writes a byte."""

    def __init__(self) -> None:
        self.requests = 0  # request heads read
        self.open = 0  # connections open now
        self.cut = 0  # connections the sender closed (its timeout fired)
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    async def start(self) -> Hang:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    def url(self, i: int) -> str:
        return f"http://127.0.0.1:{self.port}/hang/{i}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.open += 1
        self._writers.append(writer)
        try:
            while data := await reader.read(65536):
                self.requests += data.count(b"POST /hang/")
            self.cut += 1  # end of stream: the sender gave up on this send
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self.open -= 1

    async def close(self) -> None:
        for writer in self._writers:
            writer.close()
        if self._server is not None:
            self._server.close()


@pytest.fixture
def healthy() -> Iterator[Receiver]:
    r = Receiver(None).start()
    yield r
    r.stop()


@pytest.fixture
async def hang() -> AsyncIterator[Hang]:
    h = await Hang().start()
    yield h
    await h.close()


class Client:
    def __init__(self, app: Webhookd) -> None:
        self.app = app
        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.port}")
        self.stub = webhooks_pb2_grpc.WebhookServiceStub(self.channel)

    async def register(self, url: str, env: pb.Environment.ValueType, acct: str) -> Any:
        return await self.stub.RegisterEndpoint(
            pb.RegisterEndpointRequest(
                account_id=acct, environment=env, url=url, events=["booking.confirmed"]
            )
        )

    async def publish(
        self, env: pb.Environment.ValueType, acct: str, data: dict[str, Any] | None = None
    ) -> Any:
        s = event_data("booking.confirmed", **(data or {}))
        return await self.stub.PublishEvent(
            pb.PublishEventRequest(
                account_id=acct, environment=env, type="booking.confirmed", state="confirmed", data=s
            )
        )


@pytest.fixture
async def client(db_url: str) -> AsyncIterator[Client]:
    app = await run_server(
        Config(
            database=db_url,
            listen="127.0.0.1:0",
            policy=Policy(allow_private=True, allow_http=True),
            delivery_timeout=TIMEOUT,
            worker=WorkerConfig(lease_seconds=TIMEOUT * 3),
            # The worker's isolation, tested beyond the cap on endpoints (an operator may raise it):
            # the attacker here has up to 61 endpoints.
            max_endpoints=64,
        )
    )
    c = Client(app)
    yield c
    await c.channel.close()
    await app.stop(0)


async def _arrived(receiver: Receiver, count: int, within: float) -> float:
    """Seconds until ``count`` requests reached ``receiver`` (fails past ``within``)."""
    start = time.monotonic()
    while len(receiver.received()) < count:
        assert time.monotonic() - start < within, f"{len(receiver.received())}/{count} within {within} s"
        await asyncio.sleep(0.02)
    return time.monotonic() - start


async def test_sandbox_hanging_endpoints_do_not_delay_another_accounts_live_deliveries(
    client: Client, hang: Hang, healthy: Receiver
) -> None:
    """The attack: a test key registers sandbox endpoints that never answer and publishes sample events;
    another account's live deliveries to a healthy receiver still arrive at once."""
    for i in range(30):
        await client.register(hang.url(i), SANDBOX, "acct_attacker")
    await client.register(healthy.url(), LIVE, "acct_victim")
    for _ in range(10):
        await client.publish(SANDBOX, "acct_attacker")
    for _ in range(40):  # wait until the attacker's sends hang
        if hang.requests:
            break
        await asyncio.sleep(0.05)
    assert hang.requests > 0
    for i in range(20):
        await client.publish(LIVE, "acct_victim", {"booking": f"bk_{i}"})
    await _arrived(healthy, 20, BOUND)
    # ... while the attacker's sends are still hanging: no hanging send has timed out yet.
    assert hang.open > 0
    assert client.app.worker._sending > 0
    # The sandbox pool held the attacker: never more sandbox sends at once than its budget (plus the ones
    # that went slow and left it), never a live slot.
    assert hang.requests <= 2 * WorkerConfig().sandbox_concurrency


async def test_one_accounts_hanging_endpoints_do_not_delay_its_healthy_endpoint(
    client: Client, hang: Hang, healthy: Receiver
) -> None:
    """Twenty endpoints of an account hang; the account's one healthy endpoint still gets its deliveries
    (one endpoint's slow sends cannot occupy the pool, nor its account's share)."""
    acct = "acct_mixed"
    for i in range(20):
        await client.register(hang.url(i), LIVE, acct)
    await client.register(healthy.url(), LIVE, acct)
    for i in range(10):
        await client.publish(LIVE, acct, {"booking": f"bk_{i}"})
    await _arrived(healthy, 10, BOUND)
    assert hang.open > 0  # the hanging sends are all still in flight
    # No endpoint held more than its cap of sends at once.
    assert hang.requests <= 20 * WorkerConfig().per_endpoint


async def test_sandbox_tarpits_delay_neither_another_account_nor_the_accounts_healthy_endpoint(
    client: Client, hang: Hang, healthy: Receiver
) -> None:
    """Issue 34: one account's 60 never-answering sandbox endpoints and 15 sample events held another
    account's sandbox deliveries 33 - 75 s and the account's own healthy endpoint 41 - 77 s (one slow lane
    shared by every account in front of the 8-place sandbox pool, and an account's share as large as the
    pool). Both now arrive while the first hanging send is still far from its timeout: the property "not
    behind the tarpits", whatever the machine's speed (the issue's bound is 2 s; the times are printed)."""
    attacker, victim = "acct_tarpits", "acct_neighbour"
    await client.register(healthy.url("/own"), SANDBOX, attacker)
    await client.publish(SANDBOX, attacker, {"booking": "bk_before"})
    await healthy.wait_for(1)  # the account's healthy endpoint has answered before the attack
    await client.register(healthy.url("/other"), SANDBOX, victim)
    for i in range(60):
        await client.register(hang.url(i), SANDBOX, attacker)
    for i in range(15):
        await client.publish(SANDBOX, attacker, {"booking": f"bk_t{i}"})
    for _ in range(100):  # wait until the attacker's sends hang
        if hang.requests:
            break
        await asyncio.sleep(0.05)
    assert hang.requests > 0
    start = time.monotonic()
    for i in range(20):
        await client.publish(SANDBOX, victim, {"booking": f"bk_v{i}"})

    def arrived(path: str) -> int:
        return sum(r.path == path for r in healthy.received())

    own = other = None
    while own is None or other is None:
        assert hang.cut == 0, (
            f"a hanging send timed out first: {arrived('/own')}/16 own, {arrived('/other')}/20 other"
        )
        if own is None and arrived("/own") == 16:
            own = time.monotonic() - start
        if other is None and arrived("/other") == 20:
            other = time.monotonic() - start
        await asyncio.sleep(0.02)
    print(f"healthy endpoint of the account: {own:.2f} s, another account: {other:.2f} s")
    assert hang.open > 0 and hang.cut == 0  # every hanging send is still hanging


async def test_deferred_deliveries_are_sent_when_capacity_frees(db_url: str, healthy: Receiver) -> None:
    """More deliveries than one endpoint's cap, a small pool, a second account: every delivery is sent
    exactly once in the end (deferred ones wait in memory or go back to the table, none is lost)."""
    app = await run_server(
        Config(
            database=db_url,
            listen="127.0.0.1:0",
            policy=Policy(allow_private=True, allow_http=True),
            worker=WorkerConfig(concurrency=4, sandbox_concurrency=2, per_endpoint=2, batch_size=50),
        )
    )
    c = Client(app)
    healthy.delay = 0.02  # every send takes a while: caps are reached
    try:
        for acct, env in (("acct_a", LIVE), ("acct_b", LIVE), ("acct_c", SANDBOX)):
            for path in ("/one", "/two"):
                await c.register(healthy.url(f"/{acct}{path}"), env, acct)
        for i in range(20):
            for acct, env in (("acct_a", LIVE), ("acct_b", LIVE), ("acct_c", SANDBOX)):
                await c.publish(env, acct, {"booking": f"bk_{i}"})
        received = await healthy.wait_for(120, within=60)
        await asyncio.sleep(0.3)
        assert len(healthy.received()) == 120  # each exactly once
        assert len({(r.path, r.body) for r in received}) == 120
        for acct, env in (("acct_a", LIVE), ("acct_b", LIVE), ("acct_c", SANDBOX)):
            for _ in range(200):  # results are committed in the worker's next cycle
                page = await c.stub.ListDeliveries(
                    pb.ListDeliveriesRequest(account_id=acct, environment=env, page_size=100)
                )
                if {d.status for d in page.deliveries} == {pb.DELIVERY_STATUS_SUCCEEDED}:
                    break
                await asyncio.sleep(0.05)
            assert len(page.deliveries) == 40
            assert {d.status for d in page.deliveries} == {pb.DELIVERY_STATUS_SUCCEEDED}
            assert all(d.attempt_count == 1 for d in page.deliveries)
    finally:
        await c.channel.close()
        await app.stop(0)


# Sandbox storage bounds (a test key filled the disk: 240 KB of data per sample, as fast as it could).


async def _refusal(call: Any) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call
    return info.value.code(), type_from_rpc_error(info.value)[0]


async def test_sandbox_event_data_over_the_cap_is_refused_for_any_publisher(client: Client) -> None:
    big = {"customerRef": "x" * (SANDBOX_DATA_MAX_BYTES + 1)}
    assert await _refusal(client.publish(SANDBOX, "acct_big", big)) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "payload_too_large",
    )
    events = await client.stub.ListEvents(pb.ListEventsRequest(account_id="acct_big", environment=SANDBOX))
    assert list(events.events) == []  # nothing stored
    # Just under the cap is accepted; live keeps its own (larger) envelope limit.
    await client.publish(SANDBOX, "acct_big", {"customerRef": "x" * (SANDBOX_DATA_MAX_BYTES - 400)})
    await client.publish(LIVE, "acct_big", big)


async def test_sandbox_events_per_day_are_bounded_live_never(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_service, "SANDBOX_EVENTS_PER_DAY", 3)
    for _ in range(3):
        await client.publish(SANDBOX, "acct_busy")
    assert await _refusal(client.publish(SANDBOX, "acct_busy")) == (
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "rate_limited",
    )
    events = await client.stub.ListEvents(pb.ListEventsRequest(account_id="acct_busy", environment=SANDBOX))
    assert len(events.events) == 3
    await client.publish(SANDBOX, "acct_other")  # per account
    for _ in range(5):
        await client.publish(LIVE, "acct_busy")  # live is never bounded this way


async def test_sandbox_attempts_are_purged_sooner_than_live(client: Client, healthy: Receiver) -> None:
    for env in (LIVE, SANDBOX):
        await client.register(healthy.url(), env, "acct_purge")
        await client.publish(env, "acct_purge")
    await _arrived(healthy, 2, 10)
    repo = client.app.repo

    async def attempts(env: str) -> int:
        return len(await repo.list_attempts(DeliveryFilter("acct_purge", env), "", 10, None))

    for _ in range(100):  # results commit in the worker's next cycle
        if await attempts("live") and await attempts("sandbox"):
            break
        await asyncio.sleep(0.05)
    later = dt.datetime.now(dt.UTC) + SANDBOX_RETENTION + dt.timedelta(hours=1)
    assert await repo.purge_sandbox_attempts(later - SANDBOX_RETENTION) == 1
    assert await repo.purge_attempts(later - dt.timedelta(days=30)) == 0  # live's 30 days are not over
    assert (await attempts("live"), await attempts("sandbox")) == (1, 0)
