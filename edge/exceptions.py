"""Errors the edge answers with. Every refusal becomes the spec's body
``{"error": {"type", "message", "requestId", "docUrl"}}`` with the status of svckit.errors.ERROR_KINDS.

    ServiceError (svckit)
    └── EdgeError                 any refusal; ``type`` is one of ERROR_KINDS
        ├── UpstreamUnavailable   authsvc, webhookd or a product upstream cannot be reached (503)
        └── RateLimited           the key's request rate is over its limit (429, Retry-After)

A peer's error (svckit.clients.ClientError) becomes an EdgeError in one place, ``edge_error``.
"""

from __future__ import annotations

import math

from svckit.clients.errors import ClientError, PeerUnavailable
from svckit.errors import ServiceError


class EdgeError(ServiceError):
    domain = "edge.travel"


class UpstreamUnavailable(EdgeError):
    type = "service_unavailable"


class RateLimited(EdgeError):
    type = "rate_limited"

    def __init__(self, retry_after: float, message: str = "") -> None:
        self.retry_after = max(1, math.ceil(retry_after))
        super().__init__(
            message
            or f"Too many requests with this API key; retry after {self.retry_after} s. "
            "Spread requests out or use separate keys per system."
        )


# What a partner is told when authsvc or webhookd cannot be reached during a call.
PEER_UNAVAILABLE = "a backend service cannot be reached; retry later"


def edge_error(exc: ClientError) -> EdgeError:
    """The edge's answer to a peer's error: its type and whole message; 503 with PEER_UNAVAILABLE when
    the peer cannot be reached."""
    if isinstance(exc, PeerUnavailable):
        return UpstreamUnavailable(PEER_UNAVAILABLE)
    return EdgeError(exc.detail, type=exc.type)
