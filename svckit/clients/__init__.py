"""The clients of the services' gRPC APIs, one per peer, for the edge, the portal, svcctl and product
services alike (no server code is imported here: no sanic, sqlalchemy, authsvc or webhookd).

    AuthClient       travel.auth.v1 AuthService + IdentityService (authsvc)
    HooksClient      travel.webhooks.v1 WebhookService (webhookd)
    ClientError      a peer's error: type, status, message, field, code (one mapping: errors.client_error)
    PeerUnavailable  the peer cannot be reached or did not answer in time (503 service_unavailable)
    CreditExhausted  a mode A credit hold refused (402 credit_exhausted; ``body()`` for the partner)
    event_error      the ClientError webhookd would answer an event the catalog refuses, or None

Each client opens one channel (mutual TLS as svckit.tls, round robin over several addresses, safe retries:
svckit.clients.channels) with an interceptor adding ``x-request-id`` from ``svckit.logs.request_id_var``.
"""

from svckit.clients.auth import AuthClient
from svckit.clients.errors import ClientError, CreditExhausted, PeerUnavailable, client_error, mapped_errors
from svckit.clients.hooks import HooksClient, event_error
from svckit.clients.interceptors import request_id_context, request_id_interceptors
from svckit.clients.rpc import DEFAULT_TIMEOUT, ResponseStream

__all__ = [
    "DEFAULT_TIMEOUT",
    "AuthClient",
    "ClientError",
    "CreditExhausted",
    "HooksClient",
    "PeerUnavailable",
    "ResponseStream",
    "client_error",
    "event_error",
    "mapped_errors",
    "request_id_context",
    "request_id_interceptors",
]
