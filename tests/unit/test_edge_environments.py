"""The edge's Host -> environment map, a key's environment and the Deprecation/Sunset headers
(edge.environments), by table."""

from __future__ import annotations

import datetime as dt

import pytest

from edge.environments import Environment, HostMap, deprecation_headers, key_environment
from svckit.errors import http_status
from tests.unit.edge_keys import KEY, LIVE_KEY, error_type

# -- Host -> environment ---------------------------------------------------------------------------
HOSTS = HostMap(
    ["localhost:8080", "127.0.0.1:8080", "api.svc.example"], ["localhost:8081", "sandbox.svc.example"]
)


@pytest.mark.parametrize(
    ("host", "env"),
    [
        ("localhost:8080", Environment.LIVE),
        ("127.0.0.1:8080", Environment.LIVE),
        ("LOCALHOST:8080", Environment.LIVE),
        ("api.svc.example", Environment.LIVE),
        ("api.svc.example.", Environment.LIVE),
        ("localhost:8081", Environment.SANDBOX),
        ("Sandbox.Svc.Example", Environment.SANDBOX),
    ],
)
def test_environment_from_host(host: str, env: Environment) -> None:
    assert HOSTS.environment(host) is env


@pytest.mark.parametrize(
    "host", [None, "", "localhost", "localhost:9999", "evil.example", "api.svc.example:8443"]
)
def test_unknown_host_is_misdirected(host: str | None) -> None:
    assert error_type(HOSTS.environment, host) == "misdirected_request"
    assert http_status("misdirected_request") == 421


def test_host_in_both_environments_is_a_config_error() -> None:
    with pytest.raises(ValueError, match="both"):
        HostMap(["a:1"], ["A:1"])


@pytest.mark.parametrize(
    ("key", "env"), [(KEY, Environment.SANDBOX), (LIVE_KEY, Environment.LIVE), ("sk_live_x", None)]
)
def test_key_environment_from_prefix(key: str, env: Environment | None) -> None:
    assert key_environment(key) is env


# -- Deprecation / Sunset ---------------------------------------------------------------------------------
def test_deprecation_headers_for_expiring_key() -> None:
    rotated = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)
    when = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
    # Deprecation: when it was rotated out (RFC 9745); Sunset: when it stops working (RFC 8594).
    assert deprecation_headers(True, rotated, when) == {
        "Deprecation": f"@{int(rotated.timestamp())}",
        "Sunset": "Tue, 01 Dec 2026 12:00:00 GMT",
    }
    assert deprecation_headers(True, None, when) == {"Sunset": "Tue, 01 Dec 2026 12:00:00 GMT"}
    assert deprecation_headers(False, rotated, when) == {}
    assert deprecation_headers(True, rotated, None) == {}
