"""The metrics port: /metrics and nothing else (any other path 404), and a gauge a process never set is
not served at all (svckit.metrics.SetGauge: database_up, edge_ratelimit_redis_up)."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest
from prometheus_client import CollectorRegistry

from svckit.metrics import SetGauge, serve_metrics


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.fixture(scope="module")
def port() -> int:
    return serve_metrics("127.0.0.1:0")


@pytest.mark.parametrize(
    "path", ["/", "/healthz", "/readyz", "/metrics/", "/metrics/x", "/favicon.ico", "/x/metrics"]
)
def test_any_path_but_metrics_is_404(port: int, path: str) -> None:
    status, body = get(port, path)
    assert status == 404
    assert "# TYPE" not in body


@pytest.mark.parametrize("path", ["/metrics", "/metrics?debug=1"])
def test_metrics_is_served(port: int, path: str) -> None:
    status, body = get(port, path)
    assert status == 200 and "# TYPE" in body


def test_a_set_gauge_is_exported_only_once_set(port: int) -> None:
    gauge = SetGauge("outage_test_up", "a gauge of this test")
    assert "outage_test_up" not in get(port, "/metrics")[1]
    gauge.set(0)
    assert "outage_test_up 0.0" in get(port, "/metrics")[1]
    gauge.set(1)
    assert "outage_test_up 1.0" in get(port, "/metrics")[1]


def test_a_set_gauge_in_its_own_registry() -> None:
    registry = CollectorRegistry()
    gauge = SetGauge("outage_test_other_up", "another", registry=registry)
    assert registry.get_sample_value("outage_test_other_up") is None
    gauge.set(1)
    assert registry.get_sample_value("outage_test_other_up") == 1
