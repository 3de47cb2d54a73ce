"""The delivery worker's seam to where deliveries go: one ``Destination`` per endpoint type, chosen here.

A destination takes one claimed delivery's endpoint, envelope and event id and answers a ``SendResult``
like the HTTP sender's: it never raises for anything the target or the network does, and its outcome,
status, error and headers go into the attempt log as an HTTP attempt's do. Everything after the send is
the type's neither: the retry schedule, disabling, the failing levels, ordering, the per-endpoint
concurrency caps and breakers (``_delivery``, ``_outcome``, ``_admission``, ``_breaker``) are the same for
every type, so a broker that hangs is held to its endpoint's caps exactly as a slow HTTP receiver is.

- http: ``HttpDestination``, the signed POST of ``_sender``.
- amqp, nats: ``webhookd._amqp``, ``webhookd._nats`` (registered by ``_server``).
- polling: never sent to. The worker hands such a claim to ``Destinations.pulled`` (``PulledHook``); by
  default it is held (kept, not sent, recoverable) so the worker never spins on it. The polling type
  replaces the hook (``Destinations.pulled = ...``) with what its consumers need.

A type with no destination registered (a process without the broker extras, say) fails its attempts with
an error saying so: they retry by the schedule like any failure, and none is lost.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Protocol

from svckit.webhook_status import DestinationType
from webhookd._outcome import decide
from webhookd._repository import Claim, DeliveryResult, EndpointRecord
from webhookd._retry import Outcome
from webhookd._sender import Sender, SendResult


class Destination(Protocol):
    async def send(
        self, endpoint: EndpointRecord, body: bytes, event_id: str, now: dt.datetime
    ) -> SendResult:
        """One attempt: never raises for what the target or the network does."""
        ...

    async def close(self) -> None: ...


# What the worker does with a claimed delivery of an endpoint nobody pushes to (polling): its stored result.
PulledHook = Callable[[Claim, dt.datetime], DeliveryResult]


def held(claim: Claim, now: dt.datetime) -> DeliveryResult:
    """The default for a polling endpoint's delivery: held, as a disabled endpoint's are (nothing sent,
    no attempt counted, recoverable)."""
    return decide(claim, None, now)


class HttpDestination:
    """The signed POST (``_sender.Sender``) to the endpoint's url."""

    def __init__(self, sender: Sender) -> None:
        self.sender = sender

    def send(
        self, endpoint: EndpointRecord, body: bytes, event_id: str, now: dt.datetime
    ) -> Coroutine[Any, Any, SendResult]:
        # The sender's coroutine itself, awaited by the caller: no frame of our own around every send.
        return self.sender.send(
            endpoint.url,
            body,
            endpoint.valid_secrets(now),
            event_id,
            now,
            endpoint.signature_scheme,
            endpoint.signers(now),
            auth=endpoint.receiver_auth,  # its client certificate, OAuth2 token, headers (``_receiver_auth``)
        )

    async def close(self) -> None:
        return None


class Deferred:
    """A destination made at its first send: a broker's client library (aio-pika, nats-py) is imported
    only by a webhookd that has an endpoint of its type, not by every start (about 0.15 s of imports)."""

    def __init__(self, make: Callable[[], Destination]) -> None:
        self._make = make
        self._made: Destination | None = None

    async def send(
        self, endpoint: EndpointRecord, body: bytes, event_id: str, now: dt.datetime
    ) -> SendResult:
        if self._made is None:
            self._made = self._make()
        return await self._made.send(endpoint, body, event_id, now)

    async def close(self) -> None:
        if self._made is not None:
            await self._made.close()


def unsendable(kind: DestinationType) -> SendResult:
    return SendResult(
        Outcome.NETWORK_ERROR,
        0,
        "",
        {},
        0.0,
        f"this webhookd has no sender for {kind} destinations",
    )


async def _answered(result: SendResult) -> SendResult:
    return result


class Destinations:
    """The destination of each endpoint type; the worker and a manual resend send through ``send``."""

    def __init__(
        self,
        sender: Sender,
        others: Mapping[DestinationType, Destination] | None = None,
        pulled: PulledHook = held,
    ) -> None:
        self.sender = sender  # the HTTP sender, for what still needs it by itself
        self.by_type: dict[DestinationType, Destination] = {DestinationType.HTTP: HttpDestination(sender)}
        self.by_type.update(others or {})
        self.pulled = pulled

    def register(self, kind: DestinationType, destination: Destination) -> None:
        self.by_type[kind] = destination

    @staticmethod
    def pushes(endpoint: EndpointRecord) -> bool:
        """False for a type the worker never sends to (polling): its claims go to ``pulled``."""
        return endpoint.destination_type is not DestinationType.POLLING

    def send(
        self, endpoint: EndpointRecord, body: bytes, event_id: str, now: dt.datetime
    ) -> Coroutine[Any, Any, SendResult]:
        """The destination's send, for the caller to await (never raises for what the target does)."""
        destination = self.by_type.get(endpoint.destination_type)
        if destination is None:
            return _answered(unsendable(endpoint.destination_type))
        return destination.send(endpoint, body, event_id, now)

    async def close(self) -> None:
        for kind, destination in self.by_type.items():
            if kind is not DestinationType.HTTP:
                await destination.close()


def destinations_of(sender: Sender | Destinations) -> Destinations:
    """A worker or service given the HTTP sender alone (tests, benchmarks) sends HTTP only."""
    return sender if isinstance(sender, Destinations) else Destinations(sender)
