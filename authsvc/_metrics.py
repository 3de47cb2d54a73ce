"""authsvc's own Prometheus metrics (the gRPC ones come from svckit)."""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client import REGISTRY, Counter
from prometheus_client.core import GaugeMetricFamily

from svckit.metrics import LoopCounter

# Bumped on every Authorize: loop counters (svckit.metrics).
AUTHORIZE_DECISIONS = LoopCounter(
    "authsvc_authorize_decisions_total",
    "Authorize answers, by decision and error type",
    ["decision", "error_type"],
)
KEY_CACHE = LoopCounter(
    "authsvc_key_cache_total",
    "Key look-ups by result: hit or miss in the key cache, kept (an Authorize answer given again), or "
    "unknown (a key proven absent without a database read, authsvc._known_keys)",
    ["result"],
)
OUTBOX_PUBLISHED = Counter("authsvc_outbox_published_total", "Outbox events accepted by webhookd", ["type"])
OUTBOX_FAILURES = Counter("authsvc_outbox_publish_failures_total", "Failed outbox publish attempts", ["type"])
KEY_CHANGES = Counter("authsvc_key_changes_total", "Key and account changes fanned out to watchers", ["kind"])
# The request log (authsvc._requestlog): records filed, and those dropped by why.
REQUESTS_RECORDED = Counter("authsvc_request_log_recorded_total", "Request log records filed")
REQUESTS_DROPPED = Counter("authsvc_request_log_dropped_total", "Request log records not filed", ["reason"])


class OutboxBacklog:
    """``authsvc_outbox_pending`` (events written, not yet accepted by webhookd) and
    ``authsvc_outbox_oldest_pending_age_seconds`` (how long the oldest has waited, 0 when none), from the
    relay's last look (``OutboxRelay``, every ``BACKLOG_EVERY`` seconds). Nothing is exported before the
    first look (a process without a relay has none): a 0 there would be a guess."""

    def __init__(self) -> None:
        self.pending: int | None = None
        self.oldest: float | None = None

    def set(self, pending: int, oldest: float | None) -> None:
        self.pending, self.oldest = pending, oldest

    def collect(self) -> Iterator[GaugeMetricFamily]:
        if self.pending is None:
            return
        yield GaugeMetricFamily(
            "authsvc_outbox_pending", "Outbox events not yet accepted by webhookd", value=self.pending
        )
        age = 0.0 if self.oldest is None else max(0.0, time.time() - self.oldest)
        yield GaugeMetricFamily(
            "authsvc_outbox_oldest_pending_age_seconds",
            "Seconds the oldest outbox event not yet accepted by webhookd has waited (0: none waits)",
            value=age,
        )


OUTBOX_BACKLOG = OutboxBacklog()
REGISTRY.register(OUTBOX_BACKLOG)
# Usage counts (authsvc._service_usage_counts): cells applied, batches applied again (skipped), and
# cells refused as invalid.
USAGE_CELLS = Counter("authsvc_usage_cells_total", "Usage-count cells applied, or refused", ["result"])
