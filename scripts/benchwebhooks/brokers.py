"""The broker phases: durable deliveries/s from webhookd's delivery worker to RabbitMQ (amqp destinations)
and to NATS JetStream (nats destinations), each against a plain publish loop to the same broker in the same
run, what a partner's own publisher would do instead (aio-pika on a channel with publisher confirms; nats-py
JetStream publish), with as many publishes in flight as the worker may have.

The worker's run is the real one (SQLite file, claims, the destination's signed publish, group commits of
the attempt rows); a delivery counts when its result is committed. The deliveries go to ``ENDPOINTS``
endpoints in turn, all on the same broker login (so one pooled connection): one endpoint takes at most
``per_endpoint`` sends in flight, as for HTTP. The brokers are the ones on 127.0.0.1 (RabbitMQ 5672
guest/guest, NATS 4222), each phase with an exchange, queue or stream of its own, deleted afterwards.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import aio_pika
import nats

from benchwebhooks.worker import CountingRepo, endpoint, envelope, preload
from svckit.clock import SystemClock
from svckit.webhook_status import DestinationType
from webhookd._amqp import AmqpDestination
from webhookd._delivery import DeliveryWorker, WorkerConfig
from webhookd._destination_settings import AmqpSettings, NatsServer, NatsSettings, Settings
from webhookd._destinations import Destination, Destinations
from webhookd._nats import NatsDestination
from webhookd._sender import Sender
from webhookd._ssrf import Policy

ENDPOINTS = 8
POLICY = Policy(allow_private=True)


async def _durable(
    db: str, kind: DestinationType, settings: Settings, destination: Destination, n: int, cfg: WorkerConfig
) -> float:
    """Deliveries/s of ``n`` due at once through the worker to ``destination``, committed."""
    repo = await CountingRepo.open(db)
    assert isinstance(repo, CountingRepo)
    eps = [
        dataclasses.replace(endpoint(0), destination_type=kind, destination=settings)
        for _ in range(ENDPOINTS)
    ]
    for ep in eps:
        ep.url = ""
        await repo.create_endpoint(ep)
    now = dt.datetime.now(dt.UTC)
    await preload(repo, [ep.id for ep in eps], [now] * n)
    CountingRepo.committed, repo.target, repo.done, repo.only = 0, n, asyncio.Event(), None
    destinations = Destinations(Sender(None), {kind: destination})  # type: ignore[arg-type]
    worker = DeliveryWorker(repo, destinations, SystemClock(), cfg)
    start = time.perf_counter()
    task = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(repo.done.wait(), 300)
    except TimeoutError:
        print(f"  ({kind}: stopped after 300 s with {CountingRepo.committed}/{n} committed)")
    elapsed = time.perf_counter() - start
    done = CountingRepo.committed
    await worker.stop(1.0)
    await task
    await destination.close()
    await repo.close()
    return done / elapsed


async def _plain(publish: Callable[[bytes, str], Awaitable[Any]], n: int, in_flight: int) -> float:
    """Publishes/s of ``n`` messages, ``in_flight`` at a time, each waiting for its confirm or ack."""
    body = envelope("evt_plain", dt.datetime.now(dt.UTC))
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(n):
        queue.put_nowait(i)

    async def publisher() -> None:
        while not queue.empty():
            i = queue.get_nowait()
            await publish(body, f"evt_plain_{i}")

    start = time.perf_counter()
    await asyncio.gather(*(publisher() for _ in range(in_flight)))
    return n / (time.perf_counter() - start)


async def amqp_rates(db: str, n: int, cfg: WorkerConfig) -> tuple[float, float]:
    """(durable deliveries/s, plain confirmed publishes/s) to one RabbitMQ exchange and queue."""
    name = f"bench.{uuid.uuid4().hex[:10]}"
    connection = await aio_pika.connect("amqp://guest:guest@127.0.0.1:5672/")
    try:
        channel = await connection.channel(publisher_confirms=True)
        exchange = await channel.declare_exchange(name, aio_pika.ExchangeType.DIRECT, durable=True)
        queue = await channel.declare_queue(name, durable=True)
        await queue.bind(exchange, "bench")
        settings = AmqpSettings("127.0.0.1", 5672, "/", "guest", False, name, "bench", "guest")
        durable = await _durable(db, DestinationType.AMQP, settings, AmqpDestination(POLICY), n, cfg)

        async def publish(body: bytes, message_id: str) -> Any:
            message = aio_pika.Message(
                body, message_id=message_id, delivery_mode=aio_pika.DeliveryMode.PERSISTENT
            )
            return await exchange.publish(message, routing_key="bench", mandatory=True)

        plain = await _plain(publish, n, ENDPOINTS * cfg.per_endpoint)
        await queue.delete(if_unused=False, if_empty=False)
        await channel.exchange_delete(name)
    finally:
        await connection.close()
    return durable, plain


async def nats_rates(db: str, n: int, cfg: WorkerConfig) -> tuple[float, float]:
    """(durable deliveries/s, plain JetStream publishes/s) to one stream."""
    tag = uuid.uuid4().hex[:10]
    stream, subject = f"BENCH_{tag}", f"bench.{tag}"
    nc = await nats.connect("nats://127.0.0.1:4222")
    try:
        js = nc.jetstream()
        await js.add_stream(name=stream, subjects=[subject])
        settings = NatsSettings((NatsServer("127.0.0.1", 4222, False),), subject)
        durable = await _durable(db, DestinationType.NATS, settings, NatsDestination(POLICY), n, cfg)

        async def publish(body: bytes, message_id: str) -> Any:
            return await js.publish(subject, body, headers={"Nats-Msg-Id": message_id})

        plain = await _plain(publish, n, ENDPOINTS * cfg.per_endpoint)
        await js.delete_stream(stream)
    finally:
        await nc.close()
    return durable, plain
