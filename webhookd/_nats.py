"""The nats destination: a delivery published to a NATS JetStream subject of the partner's.

Success is the stream's publish acknowledgement (``PubAck``): the message is stored in a stream of theirs
(the same at-least-once as an HTTP 2xx). ``Nats-Msg-Id`` is the event id, the same on every retry, so the
stream drops a retry's duplicate within its duplicate window (a publish whose ack was lost, retried) and
receivers outside it deduplicate on it as on a webhook's id. The message: the envelope as body, and the
headers of ``webhookd._broker_message`` (signature, event id, type, time).

Failed attempts (``webhookd._broker_message``): no stream captures the subject (503, NATS's no
responders), a JetStream API error (its code), a refused login (403), a server that cannot be reached,
and no ack within the delivery timeout. Connections are pooled per server set and login
(``webhookd._broker_pool``) without reconnects of their own: a lost one is dropped and the next send
opens a new one (to the configured servers only, never to servers a cluster gossips).

Server hosts are checked against the webhook address policy when the endpoint is saved and again before
each connection (``webhookd._ssrf``); a ``nats://`` connection goes to the checked address.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import nats
import nats.errors
import nats.js.errors
from nats.aio.client import Client

from webhookd._broker_message import Timer, message_headers, misconfigured
from webhookd._broker_pool import DEFAULT_LIMIT, BrokerPool
from webhookd._destination_settings import NatsSettings
from webhookd._errors import UnsafeTarget
from webhookd._repository import EndpointRecord
from webhookd._retry import Outcome
from webhookd._sender import DELIVERY_TIMEOUT, SendResult
from webhookd._ssrf import Policy, Resolver, resolve_checked, system_resolver

PUB_ACK = 200  # what the attempt log shows for an acknowledged publish (NATS's status words are HTTP's)
NO_STREAM = 503  # NATS's "no responders": nothing captures the subject


async def _close(nc: Client) -> None:
    await nc.close()


async def _quiet(*_args: Any) -> None:
    """nats-py's callbacks log every error by default; a send reports its own."""


class NatsDestination:
    def __init__(
        self,
        policy: Policy | None = None,
        resolver: Resolver = system_resolver,
        timeout: float = DELIVERY_TIMEOUT,
        connections: int = DEFAULT_LIMIT,
    ) -> None:
        self.policy = policy or Policy()
        self.resolver = resolver
        self.timeout = timeout
        self.pool: BrokerPool[Client] = BrokerPool(_close, connections)

    async def _connect(self, s: NatsSettings) -> Client:
        servers = []
        for server in s.servers:
            addresses = await resolve_checked(server.host, server.port, self.policy, self.resolver)
            host = server.host if server.tls else addresses[0]
            host = f"[{host}]" if ":" in host else host
            servers.append(f"{'tls' if server.tls else 'nats'}://{host}:{server.port}")
        auth: dict[str, Any] = {"token": s.token} if s.token else {}
        if s.user:
            auth = {"user": s.user, "password": s.password}
        return await nats.connect(
            servers,
            name="webhookd",
            connect_timeout=self.timeout,
            allow_reconnect=False,
            max_reconnect_attempts=1,  # the initial connect tries each server twice, then gives up
            reconnect_time_wait=0.2,
            error_cb=_quiet,
            disconnected_cb=_quiet,
            closed_cb=_quiet,
            **auth,
        )

    async def send(
        self, endpoint: EndpointRecord, body: bytes, event_id: str, now: dt.datetime
    ) -> SendResult:
        s = endpoint.destination
        headers = message_headers(endpoint, body, event_id, now)
        if not isinstance(s, NatsSettings):
            return misconfigured(headers, "nats")
        headers["Content-Type"] = "application/json"
        headers["Nats-Msg-Id"] = event_id
        timer = Timer()
        key = s.pool_key()
        nc: Client | None = None
        try:
            async with asyncio.timeout(self.timeout):
                nc = await self.pool.get(key, lambda: self._connect(s))
                if nc.is_closed:
                    self.pool.drop(key, nc)
                    nc = await self.pool.get(key, lambda: self._connect(s))
                ack = await nc.jetstream().publish(s.subject, body, timeout=self.timeout, headers=headers)
        except UnsafeTarget as exc:
            return timer.result(Outcome.NETWORK_ERROR, headers, error=str(exc))
        except (TimeoutError, nats.errors.TimeoutError):
            return timer.result(Outcome.TIMEOUT, headers, error=f"no publish ack within {self.timeout:g} s")
        except nats.js.errors.NoStreamResponseError:
            return timer.result(
                Outcome.HTTP_ERROR,
                headers,
                NO_STREAM,
                f"no stream captures subject {s.subject!r} (no responders)",
            )
        except nats.js.errors.APIError as exc:
            code = exc.code or 0
            return timer.result(Outcome.HTTP_ERROR, headers, code, f"JetStream refused the message: {exc}")
        except nats.errors.AuthorizationError as exc:
            if nc is not None:
                self.pool.drop(key, nc)
            return timer.result(Outcome.HTTP_ERROR, headers, 403, f"the server refused the login: {exc}")
        except (nats.errors.Error, OSError, ConnectionError) as exc:
            if nc is not None:
                self.pool.drop(key, nc)
            return timer.result(Outcome.NETWORK_ERROR, headers, error=f"{type(exc).__name__}: {exc}")
        # A duplicate (this event id within the stream's duplicate window: a retry whose first ack was lost,
        # a resend) is acknowledged without a second message; the attempt log says so.
        said = (
            f"stored in stream {ack.stream} (duplicate of seq {ack.seq})"
            if ack.duplicate
            else f"stored in stream {ack.stream} as seq {ack.seq}"
        )
        return timer.result(Outcome.SUCCEEDED, headers, PUB_ACK, body=said)

    async def close(self) -> None:
        await self.pool.close()
