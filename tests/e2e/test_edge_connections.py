"""The edge process closes connections: idle keep-alive and silent connections at their timeouts,
``Connection: close`` answers with a FIN, a slowloris head at the header timeout, a slowly dripped body
at the body timeout, and oversize POSTs do not leak descriptors (counted in ``/proc/<pid>/fd``). One edge
process with short timeouts set by flags and the environment; authsvc is not needed for any of this."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from edge.testing import SANDBOX_HOST, edge_args
from tests.support import ServiceProcess

KEEP_ALIVE = 1.0
HEADER_TIMEOUT = 2.0
BODY_TIMEOUT = 3.0
# Bounds the wait for the edge to act; far above the timeouts, so only a connection it never closes fails.
WAIT = 15.0


@pytest.fixture(scope="module")
def edge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    tmp = tmp_path_factory.mktemp("edge_conn")
    args = edge_args("127.0.0.1:1", "127.0.0.1:1", f"sqlite+aiosqlite:///{tmp / 'e.db'}")
    proc = ServiceProcess(
        "edge",
        [*args, "--keep-alive-timeout", str(KEEP_ALIVE)],
        # the environment fallbacks
        env={"EDGE_HEADER_TIMEOUT": str(HEADER_TIMEOUT), "EDGE_BODY_TIMEOUT": str(BODY_TIMEOUT)},
    ).start(tmp / "edge.log")
    try:
        yield proc
    finally:
        proc.terminate()
    assert "Closing failed" not in proc.logs()


def descriptors(proc: ServiceProcess) -> int:
    assert proc.proc is not None
    return len(os.listdir(f"/proc/{proc.proc.pid}/fd"))


def settle(proc: ServiceProcess, baseline: int) -> int:
    """The edge's descriptor count once it is back to ``baseline`` (or after WAIT if it never is)."""
    deadline = time.monotonic() + WAIT
    while (n := descriptors(proc)) > baseline and time.monotonic() < deadline:
        time.sleep(0.1)
    return n


def connect(proc: ServiceProcess) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", proc.ports["sandbox_port"]), timeout=WAIT)
    return sock


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the edge sends until its FIN (recv returns b""); a socket timeout means no FIN came."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def trickle_until_closed(sock: socket.socket, first: bytes, rest: bytes) -> tuple[bytes, int]:
    """Sends ``first``, then ``rest`` one byte a second, while reading what the edge sends until its FIN:
    that, and how many bytes of ``rest`` went out before it."""
    sent = 0
    stop = threading.Event()

    def trickle() -> None:
        nonlocal sent
        sock.sendall(first)
        while sent < len(rest) and not stop.wait(1.0):
            try:
                sock.sendall(rest[sent : sent + 1])
            except OSError:
                return
            sent += 1

    sender = threading.Thread(target=trickle)
    sender.start()
    try:
        data = read_until_closed(sock)
    finally:
        stop.set()
        sender.join()
    return data, sent


GET = b"GET /openapi.json HTTP/1.1\r\nHost: " + SANDBOX_HOST.encode() + b"\r\n"


def test_oversize_posts_do_not_leak_descriptors(edge: ServiceProcess) -> None:
    baseline = settle(edge, descriptors(edge))
    for _ in range(100):
        s = connect(edge)
        s.sendall(
            b"POST /v1/account HTTP/1.1\r\nHost: 127.0.0.1:8081\r\nContent-Length: 2000000\r\n\r\n"
            + b"a" * 100000
        )
        s.close()
    assert settle(edge, baseline) <= baseline


def test_idle_keep_alive_connection_is_closed_at_the_keep_alive_timeout(edge: ServiceProcess) -> None:
    baseline = settle(edge, descriptors(edge))
    with connect(edge) as s:
        s.sendall(GET + b"\r\n")
        data = read_until_closed(s)  # the answer, then (after the keep-alive timeout) the FIN
        assert data.startswith(b"HTTP/1.1 200 ") and b"connection: keep-alive" in data.lower()
    assert settle(edge, baseline) <= baseline


def test_a_connection_that_never_sends_is_closed_at_the_header_timeout(edge: ServiceProcess) -> None:
    baseline = settle(edge, descriptors(edge))
    with connect(edge) as s:
        assert read_until_closed(s) == b""
    assert settle(edge, baseline) <= baseline


def test_connection_close_gets_the_answer_then_a_fin(edge: ServiceProcess) -> None:
    with connect(edge) as s:
        s.sendall(GET + b"Connection: close\r\n\r\n")
        data = read_until_closed(s)
    assert data.startswith(b"HTTP/1.1 200 ") and b"connection: close" in data.lower()


def test_slowloris_is_cut_at_the_header_timeout(edge: ServiceProcess) -> None:
    """One header byte a second: the head would take a minute; the edge answers 408 and closes at the
    header timeout although bytes keep arriving."""
    baseline = settle(edge, descriptors(edge))
    head = GET + b"X-Slow: " + b"a" * 60 + b"\r\n\r\n"
    with connect(edge) as s:
        data, sent = trickle_until_closed(s, head[:20], head[20:])
    assert sent < len(head) - 20
    assert data.startswith(b"HTTP/1.1 408 "), data[:200]
    assert b'"type":"request_timeout"' in data.replace(b" ", b"")
    assert settle(edge, baseline) <= baseline


HOST = b"Host: " + SANDBOX_HOST.encode() + b"\r\n"
AUTH = b"Authorization: Svc svc_test_0000000000000000000000000000000\r\n"
POST_HEAD = b"POST /v1/webhooks/endpoints HTTP/1.1\r\n" + HOST + AUTH + b"Content-Type: application/json\r\n"


def test_a_body_dripped_slowly_is_cut_at_the_body_timeout(edge: ServiceProcess) -> None:
    """A complete head announcing 1000 bytes, then one body byte a second (each byte well inside every
    per-byte timeout): the edge answers 408 and closes at the body timeout, not after 1000 s."""
    baseline = settle(edge, descriptors(edge))
    with connect(edge) as s:
        data, sent = trickle_until_closed(s, POST_HEAD + b"Content-Length: 1000\r\n\r\n", b" " * 1000)
    assert sent < 1000
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 "), data[:300]
    error = json.loads(body)["error"]
    assert error["type"] == "request_timeout" and "body" in error["message"], error
    assert settle(edge, baseline) <= baseline


def test_a_post_whose_body_arrives_after_its_head_is_answered(edge: ServiceProcess) -> None:
    """The body deadline leaves a normal POST alone: its head, then its body in a second packet, get the
    route's own answer (here: the made-up key refused; being a refusal with no accepted key, it ends its
    connection: svckit.connlimits.close_after)."""
    body = b'{"url": "https://example.com/hook"}'
    with connect(edge) as s:
        s.sendall(POST_HEAD + b"Content-Length: %d\r\n\r\n" % len(body))
        time.sleep(0.5)
        s.sendall(body)
        data = s.recv(65536)
    head = data.partition(b"\r\n\r\n")[0].lower()
    assert head.startswith(b"http/1.1 401 ") and b"connection: close" in head, data[:300]


@pytest.mark.parametrize(
    ("request_bytes", "status", "etype", "message"),
    [
        (b"GET /v1/x\x00y HTTP/1.1\r\n" + HOST + b"\r\n", 400, "invalid_request", "percent-encoded"),
        (b"GET /v1/x\x01y HTTP/1.1\r\n" + HOST + b"\r\n", 400, "invalid_request", "percent-encoded"),
        (b"GET /openapi.json HTTP/1.1\r\n" + HOST + b"X-A: a\x00b\r\n\r\n", 400, "invalid_request", "x-a"),
        (
            b"GET /v1/" + b"a" * 9 * 1024 + b" HTTP/1.1\r\n" + HOST + b"\r\n",
            414,
            "uri_too_long",
            "request line",
        ),
        (
            b"GET /openapi.json HTTP/1.1\r\n" + HOST + b"X-Big: " + b"a" * 100 * 1024 + b"\r\n\r\n",
            431,
            "request_header_fields_too_large",
            "header fields",
        ),
        (b"GET /openapi.json HTTP/1.1\r\n" + HOST + HOST + b"\r\n", 400, "invalid_request", "Host header"),
        (
            b"GET /v1/account HTTP/1.1\r\n" + HOST + AUTH + AUTH + b"\r\n",
            400,
            "invalid_request",
            "Authorization",
        ),
        (
            b"POST /v1/webhooks/endpoints HTTP/1.1\r\n" + HOST + AUTH + b"Idempotency-Key: a\r\n"
            b"Idempotency-Key: b\r\nContent-Length: 0\r\n\r\n",
            400,
            "invalid_request",
            "Idempotency-Key",
        ),
        (
            b"GET /v1/hotels/search HTTP/1.1\r\n" + HOST + AUTH + b"X-Partner-Customer-Ref: a\r\n"
            b"X-Partner-Customer-Ref: b\r\n\r\n",
            400,
            "invalid_request",
            "X-Partner-Customer-Ref",
        ),
        (
            b"GET http://127.0.0.1:8080/openapi.json HTTP/1.1\r\n" + HOST + b"\r\n",
            400,
            "invalid_request",
            "authority differs from the Host",
        ),
    ],
    ids=[
        "nul",
        "control",
        "nul-in-header",
        "9k-url",
        "100k-header",
        "host-twice",
        "auth-twice",
        "idempotency-key-twice",
        "customer-ref-twice",
        "absolute-form-other-host",
    ],
)
def test_a_bad_head_gets_its_error_then_a_fin(
    edge: ServiceProcess, request_bytes: bytes, status: int, etype: str, message: str
) -> None:
    with connect(edge) as s:
        s.sendall(request_bytes)
        data = read_until_closed(s)
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 %d " % status), data[:300]
    error = json.loads(body)["error"]
    assert error["type"] == etype and message in error["message"], error
    assert b"x-request-id: req_" in head.lower()


def test_absolute_form_naming_the_host_is_served(edge: ServiceProcess) -> None:
    with connect(edge) as s:
        s.sendall(b"GET http://" + SANDBOX_HOST.encode() + b"/openapi.json HTTP/1.1\r\n" + HOST + b"\r\n")
        assert s.recv(65536).startswith(b"HTTP/1.1 200 ")
