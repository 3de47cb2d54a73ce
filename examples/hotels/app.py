"""The hotels service's HTTP routes (Sanic): search, offer, book, read a booking.

Every request passes ``identity.identify`` first: the peer's certificate must be the edge's. The search
route is counted by the edge (``search: true`` in its route table), so it is not counted again here; a
booking's availability re-check is (``ConsumeSearch``, live only), as ``examples/product_hotels.py``
shows, and a used-up allowance answers 402 ``search_quota_exhausted``.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from sanic import Request, Sanic
from sanic.exceptions import SanicException
from sanic.response import HTTPResponse
from sanic.response import json as json_response

from examples.hotels.bookings import (
    Answer,
    Replayed,
    Store,
    booking_id,
    cancel_booking,
    offer,
    parse_offer,
    with_credit,
)
from examples.hotels.identity import Identity, Refusal, identify
from svckit import edgeassertion, tracing
from svckit.clients import AuthClient, ClientError, HooksClient, request_id_context
from svckit.ids import new_request_id
from svckit.protos import struct
from travel.auth.v1 import auth_pb2 as pb
from travel.webhooks.v1 import webhooks_pb2 as wpb

log = logging.getLogger(__name__)
PUBLISH_TIMEOUT = 5.0


@dataclass
class Hotels:
    auth: AuthClient
    hooks: HooksClient
    tls: bool  # False: --insecure-dev, the identity headers are taken as sent
    trusted: frozenset[str] = frozenset({"edge"})
    store: Store = field(default_factory=Store)
    # The edge's Ed25519 public key: the identity comes from its signed assertion (behind a proxy ending TLS).
    edge_key: Ed25519PublicKey | None = None


def error(status: int, type: str, message: str, rid: str) -> HTTPResponse:
    """An error answer as the edge expects one (docs/product-services.md "Errors"): ``{"error": {"type",
    "message"}}`` with a type of the error table; the edge adds the partner's ``requestId`` and ``docUrl``."""
    return json_response(_err(type, message), status=status, headers={"X-Request-Id": rid})


# Sanic's own refusals (no route, wrong method, a body too large, ...) by status, as the error table's.
SANIC_TYPES = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large", 408: "request_timeout"}


def peer_name(request: Request) -> str | None:
    """The common name of the client certificate the TLS handshake verified, or None."""
    cert = request.transport.get_extra_info("peercert")
    if not cert:
        return None
    for rdn in cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


def create_app(hotels: Hotels, name: str = "hotels") -> Sanic[Any, Any]:
    app: Sanic[Any, Any] = Sanic(name, configure_logging=False)
    app.config.ACCESS_LOG = False
    app.config.FALLBACK_ERROR_FORMAT = "json"

    async def refused(request: Request, exc: Exception) -> HTTPResponse:
        """What Sanic itself refuses, and any fault of ours, in the same error body as every answer."""
        rid = request.headers.get("x-request-id") or new_request_id()
        if isinstance(exc, SanicException) and exc.status_code < 500:
            status = exc.status_code
            return error(status, SANIC_TYPES.get(status, "invalid_request"), str(exc)[:200], rid)
        log.exception("hotels: unexpected error", extra={"request_id": rid})
        return error(500, "internal_error", "the hotels service failed; retry later", rid)

    app.error_handler.add(Exception, refused)

    async def handle(request: Request, work: Any, **params: str) -> HTTPResponse:
        rid = request.headers.get("x-request-id") or new_request_id()
        asserted = None
        if hotels.edge_key is not None:
            header = request.headers.get(edgeassertion.HEADER, "")
            now = time.time()
            asserted = edgeassertion.verify(
                header, hotels.edge_key, method=request.method, path=request.path, now=now
            )
        who = identify(
            peer_name(request), request.headers, trusted=hotels.trusted, tls=hotels.tls, asserted=asserted
        )
        if isinstance(who, Refusal):
            log.warning("refused", extra={"type": who.type, "request_id": rid})
            return error(who.status, who.type, who.message, rid)
        with (
            request_id_context(rid),
            tracing.server_span("hotels " + request.method + " " + request.path, request.headers, rid),
        ):
            try:
                answer: Answer = await work(request, who, **params)
            except ClientError as exc:
                return error(exc.status, exc.type, exc.message, rid)
        return json_response(answer.body, status=answer.status, headers={"X-Request-Id": rid})

    async def search(request: Request, who: Identity) -> Answer:
        live = who.environment == "live"
        return Answer(200, {"object": "list", "data": [offer(n, live) for n in (1, 2, 3)]})

    async def get_offer(request: Request, who: Identity, offer_id: str) -> Answer:
        found = parse_offer(offer_id, who.environment == "live")
        if found is None:
            return Answer(
                404, {"error": {"type": "not_found", "message": f"no hotel offer {offer_id[:64]!r}"}}
            )
        return Answer(200, found)

    async def get_booking(request: Request, who: Identity, booking: str) -> Answer:
        found = hotels.store.bookings.get(booking)
        if found is None or (found["_account"], found["_environment"]) != (who.account_id, who.environment):
            return Answer(404, {"error": {"type": "not_found", "message": f"no booking {booking[:64]!r}"}})
        return Answer(200, {k: v for k, v in found.items() if not k.startswith("_")})

    async def book(request: Request, who: Identity) -> Answer:
        key = request.headers.get("idempotency-key", "")
        if not key:
            return Answer(400, _err("missing_idempotency_key", "send an Idempotency-Key"))
        try:
            body = json.loads(request.body or b"{}")
        except ValueError:
            return Answer(400, _err("invalid_request", "the body is not JSON"))
        chosen = parse_offer(body.get("offer") if isinstance(body, dict) else None, who.environment == "live")
        if chosen is None:
            return Answer(400, _err("invalid_request", "offer: must be an offer id (off_hotels_1..3)"))
        try:
            return await hotels.store.once(
                (who.account_id, who.environment, key),
                request.body or b"",
                lambda: with_credit(
                    hotels.auth,
                    who.account_id,
                    who.environment,
                    booking_id(who.account_id, who.environment, key),
                    chosen,
                    lambda: confirm(who, key, chosen),
                ),
            )
        except Replayed:
            return Answer(
                422, _err("idempotency_key_reused", "this Idempotency-Key was sent with another body")
            )

    async def confirm(who: Identity, key: str, chosen: dict[str, Any]) -> Answer:
        env = pb.ENVIRONMENT_LIVE if who.environment == "live" else pb.ENVIRONMENT_SANDBOX
        account = (await hotels.auth.get_account(pb.GetAccountRequest(account_id=who.account_id))).account
        if env == pb.ENVIRONMENT_LIVE:
            # The availability re-check counts against the daily allowance (live keys only).
            await hotels.auth.consume_search(
                pb.ConsumeSearchRequest(account_id=who.account_id, environment=env, key_id=who.key_id)
            )
        bid = booking_id(who.account_id, who.environment, key)
        token = bid.removeprefix("bk_")
        data = {  # booking.confirmed's data, as svckit/catalog.py's schema says (docs/events.md)
            "booking": bid,
            "product": "hotels",
            "offer": chosen["id"],
            "amount": chosen["amount"],
            "currency": chosen["currency"],
            "supplierReference": "HTL-" + token[:8].upper(),
        }
        if account.mode == pb.ACCOUNT_MODE_B:
            data["payment"] = f"pay_{token}"
        else:
            data["hold"] = f"hold_{token}"
        await hotels.hooks.publish_event(
            wpb.PublishEventRequest(
                account_id=who.account_id,
                environment=wpb.Environment.Value(pb.Environment.Name(env)),
                type="booking.confirmed",
                data=struct(data),
                idempotency_key=f"{bid}:confirmed",  # the same booking publishes once, retries included
            ),
            timeout=PUBLISH_TIMEOUT,
        )
        booking = {
            "object": "booking",
            "id": bid,
            "state": "confirmed",
            "livemode": env == pb.ENVIRONMENT_LIVE,
        }
        booking.update(data)
        if who.traveller_id:
            booking["traveller"] = who.traveller_id
        hotels.store.remember({**booking, "_account": who.account_id, "_environment": who.environment})
        return Answer(201, booking)

    async def search_route(request: Request) -> HTTPResponse:
        return await handle(request, search)

    async def offer_route(request: Request, offer_id: str) -> HTTPResponse:
        return await handle(request, get_offer, offer_id=offer_id)

    async def book_route(request: Request) -> HTTPResponse:
        return await handle(request, book)

    async def booking_route(request: Request, booking_id: str) -> HTTPResponse:
        return await handle(request, get_booking, booking=booking_id)

    async def cancel(request: Request, who: Identity, booking: str) -> Answer:
        h = hotels
        return await cancel_booking(h.auth, h.hooks, h.store, who.account_id, who.environment, booking)

    async def cancel_route(request: Request, booking_id: str) -> HTTPResponse:
        return await handle(request, cancel, booking=booking_id)

    # Registered by call: Sanic's route decorator is untyped.
    app.add_route(search_route, "/v1/hotels/search", methods=["GET"])
    app.add_route(offer_route, "/v1/hotels/offers/<offer_id>", methods=["GET"])
    app.add_route(book_route, "/v1/hotels/bookings", methods=["POST"])
    app.add_route(booking_route, "/v1/hotels/bookings/<booking_id>", methods=["GET"])
    app.add_route(cancel_route, "/v1/hotels/bookings/<booking_id>/cancel", methods=["POST"])
    return app


def _err(type: str, message: str) -> dict[str, Any]:
    return {"error": {"type": type, "message": message}}
