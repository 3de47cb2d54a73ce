"""A broker that hangs holds only its own endpoints (docs/webhooks.md "Destinations", "Isolation"): one
account's amqp and nats destinations point at a socket that takes connections and never answers (the
handshake never completes), another account's at the real RabbitMQ. The second account's deliveries all
arrive while the first's are still waiting for their brokers, and the hanging brokers were connected to
once per broker login, not once per delivery (the connection pool's per-login lock)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aio_pika
import grpc
import pytest

from tests.support import event_data
from travel.webhooks.v1 import webhooks_pb2 as pb
from travel.webhooks.v1 import webhooks_pb2_grpc
from webhookd import Policy
from webhookd._server import Config, Webhookd, run_server
from webhookd.testing import Silent

LIVE = pb.ENVIRONMENT_LIVE
HANGING, HEALTHY = "acct_hangs", "acct_healthy"
EVENTS = 30


@pytest.fixture
async def app(sqlite_url: str) -> AsyncIterator[Webhookd]:
    # A delivery timeout far past the test: the hanging sends are still waiting when it ends.
    config = Config(
        database=sqlite_url, listen="127.0.0.1:0", policy=Policy(allow_private=True), delivery_timeout=120.0
    )
    served = await run_server(config)
    yield served
    await served.stop(0)


async def test_a_hanging_broker_holds_only_its_own_endpoints(app: Webhookd) -> None:
    silent = Silent()
    name = f"wt.iso.{uuid.uuid4().hex[:10]}"
    connection = await aio_pika.connect("amqp://guest:guest@127.0.0.1:5672/")
    try:
        channel = await connection.channel()
        exchange = await channel.declare_exchange(name, aio_pika.ExchangeType.DIRECT, auto_delete=True)
        queue = await channel.declare_queue(name, exclusive=True)
        await queue.bind(exchange, "k")
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as ch:
            stub = webhooks_pb2_grpc.WebhookServiceStub(ch)

            async def register(account: str, **destination: Any) -> str:
                reg = await stub.RegisterEndpoint(
                    pb.RegisterEndpointRequest(
                        account_id=account, environment=LIVE, events=["booking.confirmed"], **destination
                    )
                )
                return str(reg.endpoint.id)

            hanging = [
                await register(
                    HANGING,
                    type=pb.DESTINATION_TYPE_AMQP,
                    amqp=pb.AmqpDestination(url=f"amqp://guest@127.0.0.1:{silent.port}/", exchange="x"),
                ),
                await register(
                    HANGING,
                    type=pb.DESTINATION_TYPE_NATS,
                    nats=pb.NatsDestination(servers=[f"nats://127.0.0.1:{silent.port}"], subject="s"),
                ),
            ]
            await register(
                HEALTHY,
                type=pb.DESTINATION_TYPE_AMQP,
                amqp=pb.AmqpDestination(
                    url="amqp://guest@127.0.0.1:5672/", exchange=name, routing_key="k", password="guest"
                ),
            )

            async def publish(account: str, i: int) -> None:
                await stub.PublishEvent(
                    pb.PublishEventRequest(
                        account_id=account,
                        environment=LIVE,
                        type="booking.confirmed",
                        data=event_data("booking.confirmed", booking=f"bk_{i}"),
                    )
                )

            for i in range(EVENTS):
                await publish(HANGING, i)
            for _ in range(3000):  # the hanging ones have started before the healthy are published
                if silent.accepted:
                    break
                await asyncio.sleep(0.01)
            assert silent.accepted
            for i in range(EVENTS):
                await publish(HEALTHY, i)
            got = 0
            for _ in range(3000):
                while await queue.get(no_ack=True, fail=False) is not None:
                    got += 1
                if got >= EVENTS:
                    break
                await asyncio.sleep(0.01)
            assert got == EVENTS
            for endpoint_id in hanging:
                attempts = await stub.ListAttempts(
                    pb.ListAttemptsRequest(account_id=HANGING, environment=LIVE, endpoint_id=endpoint_id)
                )
                assert list(attempts.attempts) == []  # still waiting for their brokers
            # One connection per hanging broker login (amqp, nats), not one per delivery.
            assert silent.accepted <= 2
    finally:
        await connection.close()
        silent.stop()
