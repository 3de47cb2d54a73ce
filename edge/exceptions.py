"""Errors the edge answers with. Every refusal becomes the spec's body
``{"error": {"type", "message", "requestId", "docUrl"}}`` with the status of svckit.errors.ERROR_KINDS.

    ServiceError (svckit)
    └── EdgeError                 any refusal; ``type`` is one of ERROR_KINDS
        ├── UpstreamUnavailable   authsvc, webhookd or a product upstream cannot be reached (503)
        ├── WrongMethod           a known path asked with a method it does not answer (405, Allow)
        └── RateLimited           the key's request rate is over its limit (429, Retry-After)

A peer's error (svckit.clients.ClientError) becomes an EdgeError in one place, ``edge_error``; an
outage of the edge's own database in ``outage_error``. Neither ever shows a partner a peer's or a
driver's text about a failure on our side: that goes to the log only.
"""

from __future__ import annotations

import logging
import math

import grpc

from edge.field_names import partner_names
from svckit.clients.errors import ClientError, PeerUnavailable
from svckit.errors import ServiceError
from svckit.outage import INTERNAL_MESSAGE, TIMEOUT, UNAVAILABLE, OutageLog

log = logging.getLogger(__name__)
# The edge's own database, or a peer, failing requests: one line per 10 s with their count (svckit.outage).
OUTAGES = OutageLog(log)


class EdgeError(ServiceError):
    domain = "edge.travel"


class UpstreamUnavailable(EdgeError):
    type = "service_unavailable"


class WrongMethod(EdgeError):
    """A path some route matches, asked with a method none of them has (edge.methods)."""

    type = "method_not_allowed"

    def __init__(self, method: str, path: str, allowed: list[str]) -> None:
        self.allowed = allowed
        super().__init__(f"{method} is not allowed on {path[:200]}; it answers {', '.join(allowed)}")


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
    the peer cannot be reached or says it is unavailable; a 5xx of any other type with a generic
    message (the peer's text is logged with the request, never answered)."""
    if isinstance(exc, PeerUnavailable) or exc.type == "service_unavailable":
        peer_unavailable("peer", exc)
        return UpstreamUnavailable(PEER_UNAVAILABLE)
    if exc.status >= 500:
        return EdgeError(INTERNAL_MESSAGE, type="internal_error")
    return EdgeError(partner_names(exc.detail), type=exc.type)


def peer_unavailable(peer: str, exc: ClientError) -> None:
    """A call to ``peer`` (authsvc, webhookd; ``peer`` when the caller cannot tell) that failed as
    unavailable: counted in dependency_failures_total and the one summary line per interval, not a log
    line per request."""
    reason = TIMEOUT if exc.code == grpc.StatusCode.DEADLINE_EXCEEDED else UNAVAILABLE
    OUTAGES.add(peer, exc, reason)


def outage_error(exc: BaseException) -> EdgeError | None:
    """503 ``service_unavailable`` for an outage (svckit.outage.classify) of the edge's own database or
    Redis, counted by dependency and reason and logged once per interval; None for anything else."""
    if OUTAGES.count(exc) is None:
        return None
    return UpstreamUnavailable(PEER_UNAVAILABLE)
