"""StreamEvents under many open streams (issue 20): one tailer per webhookd reads each new event once and
fans it out, so 200 streams and a publisher neither exhaust the database pool nor cost a query per stream
per event; every stream gets every one of its events exactly once, in order, including streams that join
with ``since_event_id`` while events are being published, and streams that fall behind. On PostgreSQL an
event whose transaction commits after a higher seq's is still streamed (late), exactly once, and a seq
that never commits (a rollback) holds nothing back."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
import sqlalchemy as sa

from tests.support import event_data
from travel.webhooks.v1 import webhooks_pb2 as pb
from travel.webhooks.v1 import webhooks_pb2_grpc
from webhookd import Policy
from webhookd._server import Config, Webhookd, run_server
from webhookd._stream_hub import EventHub, StreamFilter
from webhookd._tables import events

LIVE = pb.ENVIRONMENT_LIVE
ACCOUNTS = ("acct_fan1", "acct_fan2")
STREAMS = 200
EVENTS = 30


@pytest.fixture
async def app(db_url: str) -> AsyncIterator[Webhookd]:
    config = Config(database=db_url, listen="127.0.0.1:0", policy=Policy(allow_private=True))
    server = await run_server(config, start_worker=False)
    yield server
    await server.stop(0)


async def publish(stub: Any, account: str, kind: str = "booking.confirmed", n: int = 0) -> str:
    booking = {"booking": f"bk_{n}".replace("-", "m")} if kind.startswith("booking.") else {}
    data = event_data(kind, **booking)
    answer = await stub.PublishEvent(
        pb.PublishEventRequest(account_id=account, environment=LIVE, type=kind, data=data)
    )
    return str(answer.event.id)


def count_event_reads(app: Webhookd) -> list[int]:
    """SELECTs on wh_events issued by this webhookd, counted as they run."""
    reads = [0]

    def before(_conn: Any, _cursor: Any, statement: str, *_a: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT") and "wh_events" in statement:
            reads[0] += 1

    sa.event.listen(app.repo.engine.sync_engine, "before_cursor_execute", before)
    return reads


async def test_200_streams_and_a_publisher(app: Webhookd) -> None:
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.port}")
    stub = webhooks_pb2_grpc.WebhookServiceStub(channel)
    first = await publish(stub, ACCOUNTS[0], n=-1)  # what the resuming streams start after
    calls: list[Any] = []

    def open_stream(account: str, since: str = "", types: tuple[str, ...] = ()) -> Any:
        call = stub.StreamEvents(
            pb.StreamEventsRequest(account_id=account, environment=LIVE, since_event_id=since, types=types)
        )
        calls.append(call)
        return call

    async def collect(call: Any, last: str) -> list[str]:
        got: list[str] = []
        while not got or got[-1] != last:
            msg = await call.read()
            assert msg is not grpc.aio.EOF
            got.append(msg.event.id)
        return got

    live = [open_stream(ACCOUNTS[i % 2]) for i in range(STREAMS)]
    # A stream is subscribed once it answers: an event only it may see proves it (none before it).
    probes = {a: await publish(stub, a, "apikey.revoked") for a in ACCOUNTS}
    for i, call in enumerate(live):
        msg = await call.read()
        assert msg.event.id == probes[ACCOUNTS[i % 2]]
    reads = count_event_reads(app)
    published: dict[str, list[tuple[str, str]]] = {a: [] for a in ACCOUNTS}
    resuming: list[Any] = []
    for n in range(EVENTS):
        account, kind = ACCOUNTS[n % 2], ("booking.confirmed", "payment.failed")[n % 3 == 0]
        published[account].append((await publish(stub, account, kind, n), kind))
        if n in (5, 17):  # streams resuming mid-publish: catch up from the database, then join live
            resuming.append(open_stream(ACCOUNTS[0], since=first))
            resuming.append(open_stream(ACCOUNTS[0], since=first, types=("payment.failed",)))
    last = {a: published[a][-1][0] for a in ACCOUNTS}
    got = await asyncio.gather(*(collect(c, last[ACCOUNTS[i % 2]]) for i, c in enumerate(live)))
    for i, ids in enumerate(got):
        assert ids == [e for e, _ in published[ACCOUNTS[i % 2]]], i  # each exactly once, in order
    every = [probes[ACCOUNTS[0]], *(e for e, _ in published[ACCOUNTS[0]])]
    payments = [e for e, k in published[ACCOUNTS[0]] if k == "payment.failed"]
    for j, call in enumerate(resuming):
        if j % 2:
            assert await collect(call, payments[-1]) == payments
        else:
            assert await collect(call, last[ACCOUNTS[0]]) == every
    # One tailer: reads grow with the events (and the 4 catch-ups), not with the 200 streams.
    assert reads[0] < 4 * EVENTS, reads[0]
    assert app.service.hub.subscribers == STREAMS + len(resuming)
    for call in calls:
        call.cancel()
    await channel.close()


async def test_a_slow_stream_falls_back_to_the_database(app: Webhookd) -> None:
    """A reader that does not keep up overflows its small queue and catches up from the database: it still
    gets every event once and in order, and never holds more than its queue's worth."""
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.port}")
    stub = webhooks_pb2_grpc.WebhookServiceStub(channel)
    hub = EventHub(queue_size=3, poll_seconds=0.05, batch=7)
    flt = StreamFilter(ACCOUNTS[0], "live", frozenset({"booking.confirmed"}))
    events = hub.events(app.repo, flt, None)
    first = asyncio.ensure_future(anext(events))
    while hub.subscribers == 0:  # noqa: ASYNC110 (the hub has no event for it)
        await asyncio.sleep(0.01)
    ids = [await publish(stub, ACCOUNTS[0], n=n) for n in range(25)]
    await publish(stub, ACCOUNTS[1])  # someone else's
    got = [(await first).id]
    while len(got) < len(ids):
        (sub,) = hub._subs
        assert len(sub.queue) <= 3
        got.append((await anext(events)).id)
        if len(got) == 2:
            await asyncio.sleep(0.3)  # fall behind while the tailer polls
    assert got == ids
    (sub,) = hub._subs
    assert sub.overflows >= 1
    with contextlib.suppress(StopAsyncIteration):
        await events.aclose()
    assert hub.subscribers == 0
    await hub.close()
    await channel.close()


@pytest.fixture
async def pg_app(pg_url: str) -> AsyncIterator[Webhookd]:
    """webhookd on PostgreSQL with a quick tailer: polls every 50 ms, gaps waited for 2 s."""
    config = Config(database=pg_url, listen="127.0.0.1:0", policy=Policy(allow_private=True))
    server = await run_server(config, start_worker=False)
    server.service.hub = EventHub(poll_seconds=0.05, gap_seconds=2.0)
    yield server
    await server.stop(0)


async def hold_event(app: Webhookd, like: str, event_id: str) -> tuple[Any, Any]:
    """A transaction that has inserted an event (a copy of ``like`` as ``event_id``: its seq is taken)
    and not committed; (connection, transaction)."""
    conn = await app.repo.engine.connect()
    tx = await conn.begin()
    row = (await conn.execute(sa.select(events).where(events.c.id == like))).one()._asdict()
    row.update(id=event_id, idempotency_key=None)
    del row["seq"]
    await conn.execute(events.insert().values(**row))
    return conn, tx


async def read_ids(call: Any, n: int) -> list[str]:
    return [(await asyncio.wait_for(call.read(), 10)).event.id for _ in range(n)]


async def test_an_event_committed_after_a_higher_seq_is_streamed_once(pg_app: Webhookd) -> None:
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{pg_app.port}")
    stub = webhooks_pb2_grpc.WebhookServiceStub(channel)
    account = ACCOUNTS[0]

    def stream(since: str = "") -> Any:
        return stub.StreamEvents(
            pb.StreamEventsRequest(account_id=account, environment=LIVE, since_event_id=since)
        )

    # From an event published first: a stream opened with no position starts wherever the RPC reaches
    # webhookd, which may be after the probe.
    start = await publish(stub, account, n=9)
    live = stream(since=start)
    probe = await publish(stub, account, n=0)
    assert await read_ids(live, 1) == [probe]
    conn, tx = await hold_event(pg_app, probe, "evt_held_a")  # transaction A holds seq n
    b = await publish(stub, account, n=1)  # transaction B commits seq n + 1
    assert await read_ids(live, 1) == [b]  # not held back by A
    resumed_open = stream(since=b)  # resumes after B while A is still open
    await tx.commit()
    await conn.close()
    assert await read_ids(live, 1) == ["evt_held_a"]  # late, by the next poll
    assert await read_ids(resumed_open, 1) == ["evt_held_a"]
    resumed_late = stream(since=b)  # resumes after B once A appeared: may have missed it
    assert await read_ids(resumed_late, 1) == ["evt_held_a"]
    c = await publish(stub, account, n=2)
    for call in (live, resumed_open, resumed_late):
        assert await read_ids(call, 1) == [c]  # A and B exactly once
        call.cancel()
    await channel.close()


async def test_a_rolled_back_seq_expires_and_holds_nothing_back(pg_app: Webhookd) -> None:
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{pg_app.port}")
    stub = webhooks_pb2_grpc.WebhookServiceStub(channel)
    hub = pg_app.service.hub
    account = ACCOUNTS[0]
    # From an event published first, as above: a stream with no position may start after the probe.
    start = await publish(stub, account, n=9)
    live = stub.StreamEvents(
        pb.StreamEventsRequest(account_id=account, environment=LIVE, since_event_id=start)
    )
    probe = await publish(stub, account, n=0)
    assert await read_ids(live, 1) == [probe]
    conn, tx = await hold_event(pg_app, probe, "evt_rolled_back")
    await tx.rollback()  # its seq is used up and never appears
    await conn.close()
    b = await publish(stub, account, n=1)
    assert await read_ids(live, 1) == [b]  # at once, while the gap is open
    assert len(hub.gaps.pending()) == 1
    async with asyncio.timeout(10):
        while hub.gaps.pending():  # noqa: ASYNC110 (given up after the bound; no event for it)
            await asyncio.sleep(0.05)
    c = await publish(stub, account, n=2)
    assert await read_ids(live, 1) == [c]
    live.cancel()
    await channel.close()
