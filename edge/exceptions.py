"""Errors the edge answers with. Every refusal becomes the spec's body
``{"error": {"type", "message", "requestId", "docUrl"}}`` with the status of svckit.errors.ERROR_KINDS.

    ServiceError (svckit)
    └── EdgeError                 any refusal; ``type`` is one of ERROR_KINDS
        ├── UpstreamUnavailable   authsvc, webhookd or a product upstream cannot be reached (503)
        └── RateLimited           the key's request rate is over its limit (429, Retry-After)
"""

from __future__ import annotations

import math

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
