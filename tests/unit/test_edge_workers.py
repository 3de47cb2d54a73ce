"""edge.workers' pure parts: each worker's metrics address and arguments."""

from __future__ import annotations

import pytest

from edge.__main__ import build_parser
from edge.workers import metrics_listen_of, worker_argv


@pytest.mark.parametrize(
    ("listen", "index", "expected"),
    [
        ("127.0.0.1:9103", 0, "127.0.0.1:9103"),
        ("127.0.0.1:9103", 1, "127.0.0.1:9104"),
        ("0.0.0.0:9103", 3, "0.0.0.0:9106"),
        ("127.0.0.1:0", 0, "127.0.0.1:0"),  # port 0: each worker picks one
        ("127.0.0.1:0", 1, "127.0.0.1:0"),
        ("[::1]:9103", 1, "[::1]:9104"),
        ("", 1, ""),  # no metrics listener
    ],
)
def test_worker_metrics_listen(listen: str, index: int, expected: str) -> None:
    assert metrics_listen_of(listen, index) == expected


def test_worker_arguments_override_the_parents() -> None:
    parent = [
        "serve",
        "--live-listen",
        "127.0.0.1:0",
        "--workers",
        "2",
        "--authsvc",
        "a:1",
        "--authsvc",
        "b:2",
    ]
    argv = worker_argv(parent, "127.0.0.1:8080", "127.0.0.1:8081", "127.0.0.1:9104")
    args = build_parser().parse_args(argv)
    assert args.workers == 1 and args.reuse_port
    assert (args.live_listen, args.sandbox_listen, args.metrics_listen) == (
        "127.0.0.1:8080",
        "127.0.0.1:8081",
        "127.0.0.1:9104",
    )
    assert args.authsvc == ["a:1", "b:2"]  # repeated flags pass through as given
    assert not build_parser().parse_args(parent).reuse_port
