"""The request-head rules on a keep-alive connection (edge.server.EdgeHttp): every head is checked, so a
bad head after good ones on the same connection is refused as on a new one."""

# ruff: noqa: F811 (the test takes the fixture imported below as an argument)

from __future__ import annotations

import json
import socket

from edge.testing import SANDBOX_HOST
from tests.e2e.test_edge_connections import connect, edge, read_until_closed  # noqa: F401 (the fixture)
from tests.support import ServiceProcess

HOST = b"Host: " + SANDBOX_HOST.encode() + b"\r\n"
GOOD = b"GET /healthz HTTP/1.1\r\n" + HOST + b"X-Note: a\r\n\r\n"


def answer(sock: socket.socket) -> bytes:
    """One whole response (head and Content-Length body) from a keep-alive connection."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += sock.recv(65536)
    return head


def test_a_changed_head_is_checked_again_on_the_same_connection(edge: ServiceProcess) -> None:
    bad_heads = [
        b"GET /healthz HTTP/1.1\r\n" + HOST + HOST + b"X-Note: a\r\n\r\n",  # Host twice
        b"GET /healthz HTTP/1.1\r\n" + HOST + b"X-Note: a\x00\r\n\r\n",  # a NUL in a value
        b"GET /healthz HTTP/1.1\r\n" + HOST + b"X Note: a\r\n\r\n",  # not a token
        b"GET /health\x7fz HTTP/1.1\r\n" + HOST + b"X-Note: a\r\n\r\n",  # DEL in the target
        # the Kelvin sign, which Sanic's lower-casing turns into "k": Idempotency-Key to the edge alone
        b"GET /healthz HTTP/1.1\r\n" + HOST + "Idempotency-\u212aey: k1\r\n\r\n".encode(),
    ]
    for bad in bad_heads:
        with connect(edge) as s:
            for _ in range(2):  # accepted, twice
                s.sendall(GOOD)
                assert answer(s).startswith(b"HTTP/1.1 200 ")
            s.sendall(bad)
            data = read_until_closed(s)
        head, _, body = data.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400 "), (bad, data[:300])
        assert json.loads(body)["error"]["type"] == "invalid_request"
