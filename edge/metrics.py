"""Prometheus metrics of the edge (served on --metrics-listen by svckit.metrics.serve_metrics)."""

from __future__ import annotations

import re
from collections import defaultdict

from prometheus_client import Counter, Gauge

from svckit.metrics import LoopCount, LoopCounter, LoopHistogram, LoopTimes, SetGauge

REFUSALS = Counter("edge_refusals_total", "Refused requests by error type", ["type"])
SANDBOX_TRIGGERS = Counter("edge_sandbox_triggers_total", "Sandbox requests carrying a trigger", ["trigger"])
SANDBOX_EVENTS = Counter(
    "edge_sandbox_events_total", "Events the sandbox published (samples, simulator)", ["type"]
)
RATELIMIT_FALLBACK = Counter(
    "edge_ratelimit_fallback_total",
    "Requests whose rate limit this edge decided alone because Redis was unreachable or failed (--redis)",
)
# Only an edge with --redis exports it, from its ping at start (edge.sharedlimit).
RATELIMIT_REDIS_UP = SetGauge(
    "edge_ratelimit_redis_up", "1 while Redis answers the rate limits' pings and checks, else 0 (--redis)"
)
STREAMS = Gauge("edge_streams_open", "Open /v1/stream WebSocket connections")
# /v1/stream's limits (edge.streamlimits): streams refused by the per-key or per-account limit ("key",
# "account"), and connections closed for sending too many messages ("messages").
STREAM_LIMITED = Counter(
    "edge_stream_limited_total", "/v1/stream connections refused or closed by a limit", ["limit"]
)

RESPONSES = LoopCounter("edge_http_responses_total", "HTTP responses by status code", ["status"])
# RESPONSES' children by status (edge.gate.Gate.finish bumps a known one's value itself).
RESPONSES_BY_STATUS: dict[int, LoopCount] = {}


def count_response(status: int) -> None:
    child = RESPONSES_BY_STATUS.get(status)
    if child is None:
        child = RESPONSES_BY_STATUS[status] = RESPONSES.labels(str(status))
    child.inc()


# Seconds from the gate taking a partner request to its answer (handler and refusals included), by the
# route's template (never the raw path: bounded) and environment. Requests refused before the gate (no
# such route, a bad request head) and the routes without a key (health, docs) are not in it.
REQUEST_SECONDS = LoopHistogram(
    "edge_http_request_duration_seconds",
    "Partner request latency at the edge, by route template and environment",
    ["route", "environment"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
# REQUEST_SECONDS' bucket bounds (+Inf last), as its children's counts are indexed (LoopTimes.observe).
LATENCY_BOUNDS = REQUEST_SECONDS.bounds
# The children by environment, then by the route as the request names it (a Sanic route's path, such
# as "v1/account", or a product route's template): one look-up per request, the template made once.
ROUTE_LATENCY: defaultdict[str, dict[str, LoopTimes]] = defaultdict(dict)


def route_template(route: str) -> str:
    """``/v1/hotels/offers/{offer_id}`` of a Sanic route path ``v1/hotels/offers/<offer_id:str>`` (a
    product route's template is already so). Pure."""
    return "/" + _PARAM.sub(r"{\1}", route.lstrip("/"))


_PARAM = re.compile(r"<([^:>]+)(?::[^>]*)?>")


def route_latency(route: str, environment: str) -> LoopTimes:
    """The latency child of ``route`` (as ``route_template`` takes it) in ``environment``."""
    routes = ROUTE_LATENCY[environment]
    child = routes.get(route)
    if child is None:
        child = routes[route] = REQUEST_SECONDS.labels(route_template(route), environment)
    return child


# The request log (edge.requestlog): records this edge could not hand to authsvc, by why (its buffer was
# full while authsvc could not be reached: the oldest go; left at shutdown; or an account's errors past its
# quota of the second, edge.requestlog.ERRORS_PER_ACCOUNT_PER_SECOND).
REQUEST_LOG_DROPPED = Counter(
    "edge_request_log_dropped_total",
    "Request log records this edge dropped before authsvc had them",
    ["reason"],
)
REQUEST_LOG_SENT = Counter("edge_request_log_sent_total", "Request log records handed to authsvc")
# Usage counts (edge.usagecounts): cells handed to authsvc, and cells dropped before it had them.
USAGE_CELLS_SENT = Counter("edge_usage_cells_sent_total", "Usage-count cells handed to authsvc")
USAGE_CELLS_DROPPED = Counter(
    "edge_usage_cells_dropped_total",
    "Usage-count cells this edge dropped before authsvc had them",
    ["reason"],
)
