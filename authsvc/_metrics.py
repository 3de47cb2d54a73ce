"""authsvc's own Prometheus metrics (the gRPC ones come from svckit)."""

from __future__ import annotations

from prometheus_client import Counter

from svckit.metrics import LoopCounter

# Bumped on every Authorize: loop counters (svckit.metrics).
AUTHORIZE_DECISIONS = LoopCounter(
    "authsvc_authorize_decisions_total",
    "Authorize answers, by decision and error type",
    ["decision", "error_type"],
)
KEY_CACHE = LoopCounter(
    "authsvc_key_cache_total",
    "Key look-ups by result: hit or miss in the key cache, or kept (an Authorize answer given again)",
    ["result"],
)
OUTBOX_PUBLISHED = Counter("authsvc_outbox_published_total", "Outbox events accepted by webhookd", ["type"])
OUTBOX_FAILURES = Counter("authsvc_outbox_publish_failures_total", "Failed outbox publish attempts", ["type"])
KEY_CHANGES = Counter("authsvc_key_changes_total", "Key and account changes fanned out to watchers", ["kind"])
# The request log (authsvc._requestlog): records filed, and those dropped by why.
REQUESTS_RECORDED = Counter("authsvc_request_log_recorded_total", "Request log records filed")
REQUESTS_DROPPED = Counter("authsvc_request_log_dropped_total", "Request log records not filed", ["reason"])
