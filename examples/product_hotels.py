"""The reference product service's start: what a hotels service (certificate ``product:hotels``) asks of
the platform when a partner confirms a booking. docs/product-services.md walks through it; the test
tests/integration/test_product_services.py runs it against real authsvc and webhookd servers.

Only ``svckit.clients``, ``svckit.tls`` and the generated stubs are imported: no server code.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from svckit.clients import AuthClient, HooksClient, request_id_context
from svckit.protos import struct
from svckit.tls import Tls
from travel.auth.v1 import auth_pb2 as pb
from travel.webhooks.v1 import webhooks_pb2 as wpb


@dataclass(frozen=True)
class Booking:
    id: str  # bk_...
    offer: str  # off_...
    amount: int  # minor units of currency
    currency: str
    supplier_reference: str
    settlement: str  # hold_... (an account of mode A) or pay_... (mode B)


class Refused(Exception):
    """The partner's key may not make this request: ``type`` is the error table's (missing_scope, ...)."""

    def __init__(self, type: str, message: str) -> None:
        super().__init__(message)
        self.type = type


async def confirm_booking(
    auth: AuthClient, hooks: HooksClient, api_key: str, booking: Booking, *, live: bool, request_id: str
) -> str:
    """Check the partner's key for the booking route, count the availability search, tell the partner's
    webhooks; the published event's id. A peer's error arrives as svckit.clients.ClientError."""
    env = pb.ENVIRONMENT_LIVE if live else pb.ENVIRONMENT_SANDBOX
    with request_id_context(request_id):  # every call below carries the partner request's id
        answer = await auth.authorize(
            pb.AuthorizeRequest(
                api_key=api_key, environment=env, required_scope="hotels:write", is_write=True
            )
        )
        if answer.decision != pb.DECISION_ALLOW:
            raise Refused(answer.error_type, answer.error_message)
        account, key = answer.account, answer.key
        # The availability check behind the booking counts against the partner's daily allowance (live
        # keys only); search_quota_exhausted is a ClientError. Never retried: it counts.
        await auth.consume_search(
            pb.ConsumeSearchRequest(account_id=account.id, environment=env, key_id=key.id)
        )
        # booking.confirmed's data, as svckit/catalog.py's schema says (docs/events.md).
        data = {
            "booking": booking.id,
            "product": "hotels",
            "offer": booking.offer,
            "amount": booking.amount,
            "currency": booking.currency,
            "supplierReference": booking.supplier_reference,
            ("payment" if account.mode == pb.ACCOUNT_MODE_B else "hold"): booking.settlement,
        }
        published = await hooks.publish_event(
            wpb.PublishEventRequest(
                account_id=account.id,
                environment=wpb.Environment.Value(pb.Environment.Name(env)),
                type="booking.confirmed",
                data=struct(data),
                idempotency_key=f"{booking.id}:confirmed",  # a retry (ours or the client's) publishes once
            ),
            timeout=5.0,
        )
    return published.event.id


def connect(prefix: str = "HOTELS") -> tuple[AuthClient, HooksClient]:
    """Clients from the environment: ``<PREFIX>_TLS_CA``/``_CERT``/``_KEY`` (the service's certificate),
    ``<PREFIX>_AUTHSVC`` and ``<PREFIX>_WEBHOOKD`` (addresses; several authsvc ones comma-separated)."""
    tls = Tls.from_env(prefix)
    auth = AuthClient(os.environ.get(f"{prefix}_AUTHSVC", "127.0.0.1:50051"), tls, timeout=2.0)
    hooks = HooksClient(os.environ.get(f"{prefix}_WEBHOOKD", "127.0.0.1:50052"), tls, timeout=5.0)
    return auth, hooks
