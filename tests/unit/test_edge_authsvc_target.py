"""The edge's authsvc addresses: one gRPC target from the --authsvc list, and its service config
(svckit.clients.auth), by table."""

from __future__ import annotations

import pytest

from svckit.clients.auth import RETRIED_METHODS
from svckit.clients.auth import auth_service_config as authsvc_service_config
from svckit.clients.auth import auth_target as authsvc_target


@pytest.mark.parametrize(
    ("addresses", "target"),
    [
        (["127.0.0.1:50051"], "127.0.0.1:50051"),
        (["authsvc.internal:50051"], "authsvc.internal:50051"),
        (["dns:///authsvc.internal:50051"], "dns:///authsvc.internal:50051"),  # a name resolving to several
        (["10.0.0.1:50051,10.0.0.2:50051"], "ipv4:10.0.0.1:50051,10.0.0.2:50051"),
        (["10.0.0.1:50051", " 10.0.0.2:50052 "], "ipv4:10.0.0.1:50051,10.0.0.2:50052"),  # repeated flag
        (["[::1]:1,[fd00::2]:2"], "ipv6:[::1]:1,[fd00::2]:2"),
        (["127.0.0.1:1,"], "127.0.0.1:1"),
    ],
)
def test_authsvc_target(addresses: list[str], target: str) -> None:
    assert authsvc_target(addresses) == target


@pytest.mark.parametrize(
    ("addresses", "message"),
    [
        ([], "no address"),
        ([" , "], "no address"),
        (["a.example:1,b.example:1"], "'a.example:1'"),  # names: one dns:/// target instead
        (["10.0.0.1:1,10.0.0.2"], "'10.0.0.2'"),
        (["10.0.0.1:1,10.0.0.2:99999"], "'10.0.0.2:99999'"),
        (["10.0.0.1:1,::1:2"], "'::1:2'"),
        (["10.0.0.1:1,[::1]:2"], "all be IPv4 or all IPv6"),
    ],
)
def test_authsvc_target_refuses(addresses: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        authsvc_target(addresses)


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [
        ([], None, "127.0.0.1:50051"),
        ([], "10.0.0.1:1,10.0.0.2:2", "10.0.0.1:1,10.0.0.2:2"),  # EDGE_AUTHSVC, comma-separated
        (["--authsvc", "10.0.0.1:1", "--authsvc", "10.0.0.2:2"], "10.9.9.9:9", "10.0.0.1:1,10.0.0.2:2"),
        (["--authsvc", "10.0.0.1:1,10.0.0.2:2"], None, "10.0.0.1:1,10.0.0.2:2"),
    ],
)
def test_authsvc_flag_repeatable_with_env_fallback(
    argv: list[str], env: str | None, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from edge.__main__ import build_parser, config_from

    if env is not None:
        monkeypatch.setenv("EDGE_AUTHSVC", env)
    else:
        monkeypatch.delenv("EDGE_AUTHSVC", raising=False)
    assert config_from(build_parser().parse_args(["serve", "--insecure-dev", *argv])).authsvc == expected


def test_a_bad_authsvc_list_stops_the_start() -> None:
    from edge.__main__ import build_parser, config_from

    with pytest.raises(ValueError, match="several addresses"):
        config_from(
            build_parser().parse_args(
                ["serve", "--insecure-dev", "--authsvc", "a.example:1", "--authsvc", "b.example:1"]
            )
        )


def test_authsvc_service_config_round_robin_and_safe_retries() -> None:
    import json

    config = json.loads(authsvc_service_config())
    assert config["loadBalancingConfig"] == [{"round_robin": {}}]
    names = {n["method"] for n in config["methodConfig"][0]["name"]}
    assert names == set(RETRIED_METHODS) and "Authorize" in names
    assert "ConsumeSearch" not in names  # it counts: never run twice
    assert config["methodConfig"][0]["retryPolicy"]["retryableStatusCodes"] == ["UNAVAILABLE"]
