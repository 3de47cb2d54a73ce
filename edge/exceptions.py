"""Errors the edge answers with. Every refusal becomes the spec's body
``{"error": {"type", "message", "requestId", "docUrl"}}`` with the status of svckit.errors.ERROR_KINDS.

    ServiceError (svckit)
    └── EdgeError                 any refusal; ``type`` is one of ERROR_KINDS
        └── UpstreamUnavailable   authsvc, webhookd or a product upstream cannot be reached (503)
"""

from __future__ import annotations

from svckit.errors import ServiceError


class EdgeError(ServiceError):
    domain = "edge.travel"


class UpstreamUnavailable(EdgeError):
    type = "service_unavailable"
