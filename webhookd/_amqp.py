"""The amqp destination: a delivery published to a RabbitMQ (AMQP 0-9-1) exchange of the partner's.

Success is the broker's publisher confirm (``Basic.Ack``) of a persistent message published mandatory,
so an acknowledged delivery is in a queue of theirs (durable if their queue is): the same at-least-once
as an HTTP 2xx. The message: the envelope as body (``application/json``), ``message_id`` the event id
(the same on every retry: receivers deduplicate on it), ``type`` the event's kind, ``timestamp`` the
attempt's time, and the headers of ``webhookd._broker_message`` (signature, event id, type, time).

Failed attempts (``webhookd._broker_message`` for how they are stored): a nack, an unroutable message
(no queue bound: 312), an exchange or vhost that does not exist (404), a login or permission refused
(403), a broker that cannot be reached, and no confirm within the delivery timeout. A channel the broker
closed (after a 404 or 403) is reopened on the next send; a failed connection is dropped from the pool
(``webhookd._broker_pool``) and reopened.

Broker hosts are checked against the webhook address policy when the endpoint is saved and again before
each connection is opened (``webhookd._ssrf``); a plain connection goes to the checked address, an
``amqps`` one to the name (the certificate is verified against it).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import ssl
from dataclasses import dataclass
from typing import Any

import aio_pika
import aiormq
from aio_pika.abc import AbstractChannel, AbstractConnection, AbstractExchange, DeliveryMode

from webhookd._broker_message import Timer, event_type, message_headers, misconfigured
from webhookd._broker_pool import DEFAULT_LIMIT, BrokerPool
from webhookd._destination_settings import AmqpSettings
from webhookd._errors import UnsafeTarget
from webhookd._repository import EndpointRecord
from webhookd._retry import Outcome
from webhookd._sender import DELIVERY_TIMEOUT, SendResult
from webhookd._ssrf import Policy, Resolver, resolve_checked, system_resolver

REPLY_SUCCESS = 200  # AMQP 0-9-1's reply-success: what the attempt log shows for a confirmed publish
UNROUTABLE = 312


@dataclass(slots=True)
class _Link:
    connection: AbstractConnection
    channel: AbstractChannel | None = None

    async def open_channel(self) -> AbstractChannel:
        if self.channel is None or self.channel.is_closed:
            self.channel = await self.connection.channel(publisher_confirms=True, on_return_raises=True)
        return self.channel


async def _close(link: _Link) -> None:
    await link.connection.close()


# The broker's refusals by the AMQP reply code they carry (a login refused is the broker's 403 too).
_REPLY_CODES: tuple[tuple[type[BaseException], int], ...] = (
    (aiormq.exceptions.ChannelAccessRefused, 403),
    (aiormq.exceptions.ChannelNotFoundEntity, 404),
    (aiormq.exceptions.ChannelLockedResource, 405),
    (aiormq.exceptions.ChannelPreconditionFailed, 406),
    (aiormq.exceptions.ProbableAuthenticationError, 403),
    (aiormq.exceptions.AuthenticationError, 403),
    (aiormq.exceptions.ConnectionNotAllowed, 530),
)


def _reply_code(exc: BaseException) -> int:
    """The AMQP reply code of a refusal (0: not a refusal the broker answered with)."""
    for kind, code in _REPLY_CODES:
        if isinstance(exc, kind):
            return code
    return 0


class AmqpDestination:
    def __init__(
        self,
        policy: Policy | None = None,
        resolver: Resolver = system_resolver,
        timeout: float = DELIVERY_TIMEOUT,
        connections: int = DEFAULT_LIMIT,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.policy = policy or Policy()
        self.resolver = resolver
        self.timeout = timeout
        self.ssl_context = ssl_context
        self.pool: BrokerPool[_Link] = BrokerPool(_close, connections)

    async def _connect(self, s: AmqpSettings) -> _Link:
        addresses = await resolve_checked(s.host, s.port, self.policy, self.resolver)
        connection = await aio_pika.connect(
            host=s.host if s.tls else addresses[0],
            port=s.port,
            login=s.user or "guest",
            password=s.password,
            virtualhost=s.vhost,
            ssl=s.tls,
            ssl_context=self.ssl_context if s.tls else None,
            timeout=self.timeout,
            client_properties={"connection_name": "webhookd"},
        )
        return _Link(connection)

    async def send(
        self, endpoint: EndpointRecord, body: bytes, event_id: str, now: dt.datetime
    ) -> SendResult:
        s = endpoint.destination
        headers = message_headers(endpoint, body, event_id, now)
        if not isinstance(s, AmqpSettings):
            return misconfigured(headers, "amqp")
        timer = Timer()
        key = s.pool_key()
        link: _Link | None = None
        try:
            async with asyncio.timeout(self.timeout):
                link = await self.pool.get(key, lambda: self._connect(s))
                channel = await link.open_channel()
                exchange: AbstractExchange = (
                    await channel.get_exchange(s.exchange, ensure=False)
                    if s.exchange
                    else channel.default_exchange
                )
                message = aio_pika.Message(
                    body,
                    headers=dict[str, Any](headers),
                    content_type="application/json",
                    message_id=event_id,
                    type=event_type(body),
                    timestamp=now,
                    delivery_mode=DeliveryMode.PERSISTENT,
                    app_id="webhookd",
                )
                await exchange.publish(message, routing_key=s.routing_key, mandatory=True)
        except UnsafeTarget as exc:  # the host resolves somewhere webhookd may not connect now
            return timer.result(Outcome.NETWORK_ERROR, headers, error=str(exc))
        except TimeoutError:
            return timer.result(
                Outcome.TIMEOUT, headers, error=f"no publisher confirm within {self.timeout:g} s"
            )
        except aio_pika.exceptions.PublishError:
            return timer.result(
                Outcome.HTTP_ERROR,
                headers,
                UNROUTABLE,
                f"the broker returned the message: no queue is bound to exchange {s.exchange!r} "
                f"for routing key {s.routing_key!r} (312 NO_ROUTE)",
            )
        except aio_pika.exceptions.DeliveryError as exc:
            return timer.result(
                Outcome.HTTP_ERROR, headers, 0, f"the broker refused the message (nack): {exc}"
            )
        except aiormq.exceptions.AMQPChannelError as exc:
            # The broker closed the channel (no such exchange, access refused): it is reopened next time.
            return timer.result(Outcome.HTTP_ERROR, headers, _reply_code(exc), f"the broker refused: {exc}")
        except (aiormq.exceptions.AMQPError, OSError, ConnectionError) as exc:
            if link is not None:
                self.pool.drop(key, link)
            code = _reply_code(exc)
            if code:  # an answer (a refused login, a vhost it does not have): stored as the broker's refusal
                return timer.result(Outcome.HTTP_ERROR, headers, code, f"the broker refused: {exc}")
            return timer.result(Outcome.NETWORK_ERROR, headers, error=f"{type(exc).__name__}: {exc}")
        return timer.result(Outcome.SUCCEEDED, headers, REPLY_SUCCESS)

    async def close(self) -> None:
        await self.pool.close()
