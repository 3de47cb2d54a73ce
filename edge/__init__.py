"""The partner-facing HTTP and WebSocket gateway (Sanic): Host -> environment, key -> authsvc
(through a cache kept honest by WatchKeyChanges), idempotency, webhook management over webhookd,
/v1/stream, and product routes from a route table."""

from __future__ import annotations

from edge.app import create_app
from edge.config import EdgeConfig
from edge.exceptions import EdgeError, UpstreamUnavailable
from edge.routetable import RouteTable

__all__ = ["EdgeConfig", "EdgeError", "RouteTable", "UpstreamUnavailable", "create_app"]
