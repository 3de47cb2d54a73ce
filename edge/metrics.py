"""Prometheus metrics of the edge (served on --metrics-listen by svckit.metrics.serve_metrics)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

from svckit.metrics import LoopCount, LoopCounter

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
# /v1/stream's limits (edge.streamlimits): streams refused by the per-key or per-account limit ("key",
# "account"), and connections closed for sending too many messages ("messages").
STREAM_LIMITED = Counter(
    "edge_stream_limited_total", "/v1/stream connections refused or closed by a limit", ["limit"]
)

RESPONSES = LoopCounter("edge_http_responses_total", "HTTP responses by status code", ["status"])
_by_status: dict[int, LoopCount] = {}


def count_response(status: int) -> None:
    child = _by_status.get(status)
    if child is None:
        child = _by_status[status] = RESPONSES.labels(str(status))
    child.inc()


# The request log (edge.requestlog): records this edge could not hand to authsvc, by why (its buffer was
# full while authsvc could not be reached: the oldest go; or left at shutdown).
REQUEST_LOG_DROPPED = Counter(
    "edge_request_log_dropped_total",
    "Request log records this edge dropped before authsvc had them",
    ["reason"],
)
REQUEST_LOG_SENT = Counter("edge_request_log_sent_total", "Request log records handed to authsvc")
