"""Prometheus metrics of the edge (served on --metrics-listen by svckit.metrics.serve_metrics)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

RESPONSES = Counter("edge_http_responses_total", "HTTP responses by status code", ["status"])
REFUSALS = Counter("edge_refusals_total", "Refused requests by error type", ["type"])
STREAMS = Gauge("edge_streams_open", "Open /v1/stream WebSocket connections")

_children: dict[int, Counter] = {}


def count_response(status: int) -> None:
    child = _children.get(status)
    if child is None:
        child = _children[status] = RESPONSES.labels(str(status))
    child.inc()
