"""Offers and bookings of the reference hotels service, in memory, and the partner's Idempotency-Key.

The offers are the sandbox simulator's (docs/sandbox.md): three per search, ``off_hotels_1..3``. A
booking's id derives from the account, the environment and the Idempotency-Key, so a request the edge
re-runs (it died after we answered, before it stored our answer) finds the same booking, and the
``booking.confirmed`` it publishes carries the same webhookd idempotency key: one booking, one event,
even across a restart of this service.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

CURRENCY = "EUR"
OFFERS = [
    ("Hotel Sandbox Centrum, double room", 25800),
    ("Hotel Test Harbour, suite", 41200),
    ("Hostel Example, private room", 8900),
]
MAX_REMEMBERED = 10_000


def offer(n: int, live: bool) -> dict[str, Any]:
    name, amount = OFFERS[n - 1]
    return {
        "object": "offer",
        "id": f"off_hotels_{n}",
        "product": "hotels",
        "name": name,
        "amount": amount,
        "currency": CURRENCY,
        "livemode": live,
    }


def parse_offer(offer_id: object, live: bool) -> dict[str, Any] | None:
    """The offer an id names, or None."""
    if not isinstance(offer_id, str) or not offer_id.startswith("off_hotels_"):
        return None
    n = offer_id.removeprefix("off_hotels_")
    return offer(int(n), live) if n in {"1", "2", "3"} else None


def booking_id(account_id: str, environment: str, idempotency_key: str) -> str:
    digest = hashlib.sha256(f"{account_id}\n{environment}\n{idempotency_key}".encode()).hexdigest()
    return f"bk_{digest[:20]}"


@dataclass(frozen=True)
class Answer:
    status: int
    body: dict[str, Any]


class Replayed(Exception):
    """The Idempotency-Key was used before with another request body."""


class Store:
    """Bookings by id, and answers by (account, environment, Idempotency-Key): the latest
    ``MAX_REMEMBERED`` of each. A repeated key with the same body gets the first answer (a concurrent
    repeat waits for it); with another body, ``Replayed``."""

    def __init__(self) -> None:
        self.bookings: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._answers: OrderedDict[tuple[str, str, str], tuple[str, asyncio.Future[Answer]]] = OrderedDict()

    def remember(self, booking: dict[str, Any]) -> None:
        self.bookings[booking["id"]] = booking
        while len(self.bookings) > MAX_REMEMBERED:
            self.bookings.popitem(last=False)

    async def once(
        self, scope: tuple[str, str, str], body: bytes, run: Callable[[], Awaitable[Answer]]
    ) -> Answer:
        fingerprint = hashlib.sha256(body).hexdigest()
        known = self._answers.get(scope)
        if known is not None:
            if known[0] != fingerprint:
                raise Replayed()
            return await asyncio.shield(known[1])
        future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self._answers[scope] = (fingerprint, future)
        while len(self._answers) > MAX_REMEMBERED:
            self._answers.popitem(last=False)
        try:
            answer = await run()
        except BaseException as exc:
            # A failure is not remembered: the partner's retry runs again.
            self._answers.pop(scope, None)
            future.set_exception(exc)
            future.exception()  # retrieved: no "never retrieved" warning when nobody waited
            raise
        future.set_result(answer)
        return answer
