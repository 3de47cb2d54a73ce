"""The destinations of the destination contract test (``test_destination_contract``): one ``Target`` per
endpoint type, each a real receiving end that can be made to refuse deliveries honestly and to take them
again, and that reads back what it took.

- http: an HTTPS receiver (``webhookd.testing.Receiver``) answering 503 while refusing.
- amqp: RabbitMQ at 127.0.0.1:5672 (guest/guest), an exchange and a queue of the test's own (unique
  names); refusing = the exchange does not exist (the broker closes the channel: 404).
- nats: NATS JetStream at 127.0.0.1:4222, a stream of the test's own on a subject of its own; refusing =
  no stream captures the subject (no responders: 503). A stream deleted to refuse is read first.

A new type adds its class here and its name to ``TARGETS``.
"""

from __future__ import annotations

import ssl
import uuid
from dataclasses import dataclass
from typing import Any, Protocol

import aio_pika
import nats
from nats.js.errors import NotFoundError

from travel.webhooks.v1 import webhooks_pb2 as pb
from webhookd.testing import Receiver

AMQP_URL = "amqp://guest:guest@127.0.0.1:5672/"
NATS_URL = "nats://127.0.0.1:4222"


@dataclass
class Got:
    event_id: str
    body: bytes
    headers: dict[str, str]  # lower-case names


class Target(Protocol):
    kind: str
    refused_status: int  # the attempt log's status of a refused delivery
    dedups: bool  # a resend of what it already holds is acknowledged without a second copy

    async def open(self, tls: tuple[ssl.SSLContext, str]) -> None: ...

    def shown(self) -> str:
        """How its disable e-mail and operational events name it (``url``): never a credential."""
        ...

    def registration(self) -> dict[str, Any]:
        """The RegisterEndpointRequest fields of its destination."""
        ...

    def process_args(self) -> list[str]:
        """webhookd flags it needs when webhookd runs as a process."""
        ...

    async def accept(self, on: bool) -> None:
        """Take deliveries (True) or refuse them (False)."""
        ...

    async def received(self) -> list[Got]:
        """Everything it took so far, in the order it took them."""
        ...

    async def close(self) -> None: ...


class HttpTarget:
    kind = "http"
    refused_status = 503
    dedups = False

    async def open(self, tls: tuple[ssl.SSLContext, str]) -> None:
        self.on = False
        self.ca = tls[1]
        self.taken: list[Got] = []
        self.receiver = Receiver(tls[0], responder=self._answer).start()

    def _answer(self, r: Any) -> int:
        if not self.on:
            return 503
        self.taken.append(Got(r.headers.get("x-service-event-id", ""), r.body, r.headers))
        return 200

    def shown(self) -> str:
        return self.receiver.url()

    def registration(self) -> dict[str, Any]:
        return {"url": self.receiver.url()}

    def process_args(self) -> list[str]:
        return ["--ca-bundle", self.ca]

    async def accept(self, on: bool) -> None:
        self.on = on

    async def received(self) -> list[Got]:
        return list(self.taken)

    async def close(self) -> None:
        self.receiver.stop()


class AmqpTarget:
    kind = "amqp"
    refused_status = 404
    dedups = False

    async def open(self, tls: tuple[ssl.SSLContext, str]) -> None:
        self.name = f"wt.dest.{uuid.uuid4().hex[:12]}"
        self.connection = await aio_pika.connect(AMQP_URL)
        self.channel = await self.connection.channel()
        self.queue = await self.channel.declare_queue(self.name, durable=True)
        self.got: list[Got] = []

    def shown(self) -> str:
        return f"amqp://127.0.0.1:5672/%2F {self.name}/bookings"

    def registration(self) -> dict[str, Any]:
        return {
            "type": pb.DESTINATION_TYPE_AMQP,
            "amqp": pb.AmqpDestination(
                url="amqp://guest@127.0.0.1:5672/%2F",
                exchange=self.name,
                routing_key="bookings",
                password="guest",
            ),
        }

    def process_args(self) -> list[str]:
        return []

    async def accept(self, on: bool) -> None:
        if on:
            exchange = await self.channel.declare_exchange(
                self.name, aio_pika.ExchangeType.DIRECT, durable=True
            )
            await self.queue.bind(exchange, "bookings")
        else:
            await self.channel.exchange_delete(self.name)

    async def received(self) -> list[Got]:
        while (message := await self.queue.get(no_ack=True, fail=False)) is not None:
            headers = {k.lower(): str(v) for k, v in (message.headers or {}).items()}
            self.got.append(Got(str(message.message_id), message.body, headers))
        return list(self.got)

    async def close(self) -> None:
        await self.channel.exchange_delete(self.name)
        await self.queue.delete(if_unused=False, if_empty=False)
        await self.connection.close()


class NatsTarget:
    kind = "nats"
    refused_status = 503
    dedups = True

    async def open(self, tls: tuple[ssl.SSLContext, str]) -> None:
        tag = uuid.uuid4().hex[:12]
        self.stream = f"WTDEST_{tag}"
        self.subject = f"wt.dest.{tag}.events"
        self.nc = await nats.connect(NATS_URL)
        self.js = self.nc.jetstream()
        self.got: list[Got] = []
        self.read_to = 0

    def shown(self) -> str:
        return f"nats://127.0.0.1:4222 {self.subject}"

    def registration(self) -> dict[str, Any]:
        return {
            "type": pb.DESTINATION_TYPE_NATS,
            "nats": pb.NatsDestination(servers=["nats://127.0.0.1:4222"], subject=self.subject),
        }

    def process_args(self) -> list[str]:
        return []

    async def accept(self, on: bool) -> None:
        if on:
            await self.js.add_stream(name=self.stream, subjects=[self.subject])
            self.read_to = 0
        else:
            await self.received()
            await self.js.delete_stream(self.stream)

    async def received(self) -> list[Got]:
        try:
            info = await self.js.stream_info(self.stream)
        except NotFoundError:
            return list(self.got)
        for seq in range(self.read_to + 1, info.state.last_seq + 1):
            msg = await self.js.get_msg(self.stream, seq)
            headers = {k.lower(): v for k, v in (msg.headers or {}).items()}
            self.got.append(Got(headers.get("nats-msg-id", ""), msg.data or b"", headers))
        self.read_to = info.state.last_seq
        return list(self.got)

    async def close(self) -> None:
        try:
            await self.js.delete_stream(self.stream)
        except NotFoundError:
            pass
        await self.nc.close()


TARGETS: dict[str, type[Target]] = {"http": HttpTarget, "amqp": AmqpTarget, "nats": NatsTarget}
