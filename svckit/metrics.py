"""Prometheus /metrics for every service, served on its own port."""

from __future__ import annotations

from prometheus_client import Counter, Histogram, start_http_server

GRPC_HANDLED = Counter(
    "grpc_server_handled_total", "gRPC calls completed, by method and status code", ["method", "code"]
)
GRPC_LATENCY = Histogram(
    "grpc_server_handling_seconds",
    "gRPC call latency (unary) or stream lifetime",
    ["method"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
GRPC_REFUSED = Counter(
    "grpc_server_refused_total",
    "gRPC calls refused by the per-RPC allow list, by method and caller certificate identity",
    ["method", "peer"],
)


def serve_metrics(listen: str) -> int:
    """Start the /metrics HTTP server on ``host:port`` (port 0 picks one); returns the bound port."""
    host, _, port = listen.rpartition(":")
    server, _thread = start_http_server(int(port), addr=host or "127.0.0.1")
    return int(server.server_port)
