"""webhookd's Prometheus metrics (served on --metrics-listen with svckit's gRPC metrics)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

from svckit.metrics import LoopCounter, LoopHistogram

# Bumped on every delivery, from the event loop only: svckit's lock-free kinds (svckit.metrics).
ATTEMPTS = LoopCounter("webhook_attempts_total", "Delivery attempts, by outcome", ["outcome"])
QUEUE_DEPTH = Gauge("webhook_queue_depth", "Deliveries waiting for an attempt (status pending)")
OLDEST_OVERDUE = Gauge(
    "webhook_oldest_overdue_seconds",
    "Age of the oldest delivery whose attempt is due but not being sent (unclaimed, or its lease ran out)",
)
LEASE_EXPIRED = Gauge(
    "webhook_deliveries_lease_expired",
    "Deliveries claimed by a process whose lease ran out before it recorded a result (it died or hangs), "
    "not yet claimed again",
)
LATENCY = LoopHistogram(
    "webhook_delivery_latency_seconds",
    "Time from sending a delivery's request to its response (or error)",
    (),
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
).labels()
LAG = LoopHistogram(
    "webhook_delivery_lag_seconds",
    "Time between an attempt's due time and its send",
    (),
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
).labels()
ENDPOINTS_DISABLED = Counter(
    "webhook_endpoints_disabled_total", "Endpoints disabled after the last retry failed"
)
EVENTS_FILTERED = Counter(
    "webhook_events_filtered_total",
    "Events an endpoint subscribed to its kind did not get because its content filter did not match them",
)
ALERTS_SENT = Counter("webhook_alert_emails_total", "Disable alert e-mails, by result", ["result"])
EVENTS_REFUSED = Counter(
    "webhook_events_refused_total",
    "PublishEvent calls refused, by publisher (the caller's certificate identity) and reason: "
    "not_a_publisher, sandbox_only, other_product (svckit.publishers), unknown_kind, mode, invalid_state, "
    "invalid_data (svckit.eventcheck)",
    ["publisher", "reason"],
)
