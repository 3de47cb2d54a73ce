"""The default accepted Host values follow the listen addresses (issue 9 item 3)."""

from __future__ import annotations

import pytest

from edge.environments import listen_hosts


@pytest.mark.parametrize(
    ("listen_host", "port", "expected"),
    [
        ("127.0.0.1", 18280, ["localhost:18280", "127.0.0.1:18280"]),
        ("", 8081, ["localhost:8081", "127.0.0.1:8081"]),
        ("0.0.0.0", 9000, ["localhost:9000", "127.0.0.1:9000"]),
        ("::", 9000, ["localhost:9000", "127.0.0.1:9000", "[::1]:9000"]),
        ("[::1]", 9000, ["localhost:9000", "[::1]:9000"]),
        ("localhost", 9000, ["localhost:9000", "127.0.0.1:9000"]),
        ("10.1.2.3", 8443, ["10.1.2.3:8443"]),
        ("API.svc.example", 8443, ["api.svc.example:8443"]),
        ("[2001:db8::1]", 8443, ["[2001:db8::1]:8443"]),
        ("10.1.2.3", 80, ["10.1.2.3:80", "10.1.2.3"]),  # port 80: clients may leave it out
    ],
)
def test_listen_hosts(listen_host: str, port: int, expected: list[str]) -> None:
    assert listen_hosts(listen_host, port) == expected


def test_cli_hosts_follow_the_listen_flags_unless_given(monkeypatch: pytest.MonkeyPatch) -> None:
    from edge.__main__ import build_parser, config_from

    for name in ("EDGE_LIVE_LISTEN", "EDGE_SANDBOX_LISTEN", "EDGE_LIVE_HOSTS", "EDGE_SANDBOX_HOSTS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("EDGE_INSECURE_DEV", "1")  # TLS is not the subject
    default = config_from(build_parser().parse_args(["serve"]))
    assert list(default.sandbox_hosts) == ["localhost:8081", "127.0.0.1:8081"]
    monkeypatch.setenv("EDGE_SANDBOX_LISTEN", "127.0.0.1:18281")
    moved = config_from(build_parser().parse_args(["serve", "--live-listen", "127.0.0.1:18280"]))
    assert list(moved.live_hosts) == ["localhost:18280", "127.0.0.1:18280"]
    assert list(moved.sandbox_hosts) == ["localhost:18281", "127.0.0.1:18281"]
    bound = config_from(build_parser().parse_args(["serve", "--live-listen", "127.0.0.1:0"]), [4100, 4101])
    assert list(bound.live_hosts) == ["localhost:4100", "127.0.0.1:4100"]
    given = config_from(build_parser().parse_args(["serve", "--sandbox-hosts", "sandbox.example"]))
    assert list(given.sandbox_hosts) == ["sandbox.example"]
