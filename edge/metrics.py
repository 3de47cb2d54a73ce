"""Prometheus metrics of the edge (served on --metrics-listen by svckit.metrics.serve_metrics)."""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterator

from prometheus_client import REGISTRY, Counter, Gauge
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

REFUSALS = Counter("edge_refusals_total", "Refused requests by error type", ["type"])
SANDBOX_TRIGGERS = Counter("edge_sandbox_triggers_total", "Sandbox requests carrying a trigger", ["trigger"])
SANDBOX_EVENTS = Counter(
    "edge_sandbox_events_total", "Events the sandbox published (samples, simulator)", ["type"]
)
RATELIMIT_FALLBACK = Counter(
    "edge_ratelimit_fallback_total",
    "Requests whose rate limit this edge decided alone because Redis was unreachable or failed (--redis)",
)
RATELIMIT_REDIS_UP = Gauge(
    "edge_ratelimit_redis_up", "1 after a check went to Redis, 0 after one fell back to the local bucket"
)
STREAMS = Gauge("edge_streams_open", "Open /v1/stream WebSocket connections")

# Responses are counted in a plain dict on the hot path (no lock) and exported at scrape time.
_responses: Tally[int] = Tally()


def count_response(status: int) -> None:
    _responses[status] += 1


class _ResponsesCollector(Collector):
    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "edge_http_responses", "HTTP responses by status code", labels=["status"]
        )
        for status, n in sorted(_responses.copy().items()):
            family.add_metric([str(status)], n)
        yield family


REGISTRY.register(_ResponsesCollector())
