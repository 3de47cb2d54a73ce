"""Offers and bookings of the reference hotels service, in memory, and the partner's Idempotency-Key.

The offers are the sandbox simulator's (docs/sandbox.md): three per search, ``off_hotels_1..3``. A
booking's id derives from the account, the environment and the Idempotency-Key, so a request the edge
re-runs (it died after we answered, before it stored our answer) finds the same booking, and the
``booking.confirmed`` it publishes carries the same webhookd idempotency key: one booking, one event,
even across a restart of this service.

Mode A credit (docs/product-services.md "Credit (mode A)"): ``with_credit`` holds a live mode A booking's
amount against the partner's credit before the supplier is asked, captures it once the booking is
confirmed and releases it if the booking fails. The hold is keyed by the booking id, so a re-run booking
finds its own hold. A booking that does not fit raises ``CreditExhausted`` (HTTP 402 ``credit_exhausted``)
before anything reaches the supplier.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from svckit.clients import AuthClient, ClientError, HooksClient
from svckit.protos import struct
from travel.auth.v1 import auth_pb2 as pb
from travel.webhooks.v1 import webhooks_pb2 as wpb

log = logging.getLogger(__name__)

CURRENCY = "EUR"
OFFERS = [
    ("Hotel Sandbox Centrum, double room", 25800),
    ("Hotel Test Harbour, suite", 41200),
    ("Hostel Example, private room", 8900),
]
MAX_REMEMBERED = 10_000
PUBLISH_TIMEOUT = 5.0


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


async def with_credit(
    auth: AuthClient,
    account_id: str,
    environment: str,
    bid: str,
    chosen: dict[str, Any],
    book: Callable[[], Awaitable[Answer]],
) -> Answer:
    """``book()`` under a credit hold of ``chosen``'s amount when the account is mode A and the booking
    live (the sandbox spends no credit: its ``credit_exhausted`` trigger plays the refusal). A refused hold
    raises CreditExhausted before ``book`` runs; a failure of ``book`` releases the hold; a confirmed
    booking captures it."""
    if environment != "live":
        return await book()
    account = (await auth.get_account(pb.GetAccountRequest(account_id=account_id))).account
    if account.mode != pb.ACCOUNT_MODE_A:
        return await book()
    live = pb.ENVIRONMENT_LIVE
    await auth.place_credit_hold(
        pb.PlaceCreditHoldRequest(
            account_id=account_id,
            environment=live,
            booking_ref=bid,
            amount=chosen["amount"],
            currency=chosen["currency"],
        )
    )
    try:
        answer = await book()
    except BaseException:
        await release_credit(auth, account_id, bid)
        raise
    if answer.status >= 300:
        await release_credit(auth, account_id, bid)
        return answer
    try:
        await auth.capture_credit_hold(
            pb.CaptureCreditHoldRequest(account_id=account_id, environment=live, booking_ref=bid)
        )
    except ClientError as exc:
        # The booking stands; its hold still counts against the credit and is captured on a re-run.
        log.warning("credit capture failed", extra={"booking": bid, "type": exc.type})
    return answer


async def release_credit(auth: AuthClient, account_id: str, bid: str) -> None:
    """Give a booking's hold back (it failed, or was cancelled); a missing hold is nothing to give back."""
    request = pb.ReleaseCreditHoldRequest(
        account_id=account_id, environment=pb.ENVIRONMENT_LIVE, booking_ref=bid
    )
    try:
        await auth.release_credit_hold(request)
    except ClientError as exc:
        if exc.type != "not_found":
            log.warning("credit release failed", extra={"booking": bid, "type": exc.type})


def public(booking: dict[str, Any]) -> dict[str, Any]:
    """A stored booking as the partner sees it (without the store's own ``_`` fields)."""
    return {k: v for k, v in booking.items() if not k.startswith("_")}


async def cancel_booking(
    auth: AuthClient, hooks: HooksClient, store: Store, account_id: str, environment: str, bid: str
) -> Answer:
    """Cancel a confirmed booking of the caller's (``POST /v1/hotels/bookings/{id}/cancel``): its credit
    hold, if it spent one, is released before ``booking.cancelled`` is published. Cancelling again answers
    the cancelled booking (the release and the event are keyed by the booking: nothing happens twice)."""
    found = store.bookings.get(bid)
    if found is None or (found["_account"], found["_environment"]) != (account_id, environment):
        return Answer(404, {"error": {"type": "not_found", "message": f"no booking {bid[:64]!r}"}})
    if environment == "live" and "hold" in found:
        await release_credit(auth, account_id, bid)
    env = wpb.ENVIRONMENT_LIVE if environment == "live" else wpb.ENVIRONMENT_SANDBOX
    data = {k: found[k] for k in ("booking", "product", "offer", "amount", "currency")}
    await hooks.publish_event(
        wpb.PublishEventRequest(
            account_id=account_id,
            environment=env,
            type="booking.cancelled",
            state="cancelled",
            data=struct({**data, "cancelledBy": "partner"}),
            idempotency_key=f"{bid}:cancelled",
        ),
        timeout=PUBLISH_TIMEOUT,
    )
    found["state"] = "cancelled"
    return Answer(200, public(found))
