"""The edge writes a response head in one pass (edge.server.EdgeHttp.http1_response_header with
edge.responses.response_head) instead of Sanic's writer: over real sockets, every answer below is byte for
byte what Sanic's own protocol sends for the same response, the ones Sanic shapes or sanitises (and the
edge leaves to it) included."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from types import SimpleNamespace
from typing import Any

import pytest
from sanic import Request, Sanic
from sanic.config import Config
from sanic.response import HTTPResponse

from edge.responses import EdgeResponse, response_head
from edge.server import EdgeProtocol
from svckit.webserver import Running, ServerProtocol, start

JSON = "application/json"
# path: (status, body, headers, content type)
ANSWERS: dict[str, tuple[int, bytes | None, dict[str, object], str | None]] = {
    "/plain": (200, b'{"a":1}', {"X-Request-Id": "req_0123456789abcdef01234567"}, JSON),
    "/two": (200, b"{}", {"X-Request-Id": "req_1", "Deprecation": "@1767225600"}, JSON),
    "/created": (201, b'{"id":"x"}', {}, JSON),
    "/empty": (200, b"", {}, JSON),
    "/none-body": (200, None, {}, JSON),
    "/misdirected": (421, b'{"error":{}}', {"X-Request-Id": "req_2"}, JSON),
    "/limited": (429, b"{}", {"Retry-After": 5}, JSON),  # a value that is not a str
    "/own-type": (200, b"x", {"Content-Type": "text/plain"}, JSON),  # kept in its place
    "/no-type": (200, b"x", {}, None),
    "/own-length": (200, b"abc", {"Content-Length": "99"}, JSON),  # Sanic's: replaced
    "/own-connection": (200, b"abc", {"Connection": "close"}, JSON),
    "/injected": (200, b"{}", {"X-Injected": "a\r\nSet-Cookie: x=1"}, JSON),  # Sanic's: CR LF removed
    "/lone-lf": (200, b"{}", {"X-Lf": "a\nb"}, JSON),
    "/nul": (200, b"{}", {"X-Nul": "before\x00after"}, JSON),
    "/unicode": (200, b"{}", {"X-Unicode": "caf\u00e9"}, JSON),
    "/no-content": (204, None, {"X-Request-Id": "req_3"}, JSON),
    "/not-modified": (304, None, {"X-Request-Id": "req_4"}, JSON),
    "/precondition": (412, b"{}", {"X-Request-Id": "req_5"}, JSON),
}


def heads_app(kind: str) -> Sanic[Config, SimpleNamespace]:
    app = Sanic(f"heads_{kind}_{uuid.uuid4().hex[:8]}", configure_logging=False)
    app.config.ACCESS_LOG = False

    def answer(path: str) -> Callable[[Request], Coroutine[Any, Any, HTTPResponse]]:
        status, body, headers, content_type = ANSWERS[path]

        async def handler(request: Request) -> HTTPResponse:
            return EdgeResponse(body, status=status, headers=dict(headers), content_type=content_type)  # type: ignore[arg-type]

        return handler

    for path in ANSWERS:
        app.add_route(answer(path), path, methods=["GET", "HEAD"], name=path.strip("/").replace("-", "_"))
    return app


@pytest.fixture
async def servers(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[int, int]]:
    """(the edge's protocol, Sanic's own protocol): ports serving the same answers."""
    monkeypatch.setattr(Sanic, "test_mode", True)  # two apps started in one process (Sanic's touch-up)
    edge: Running = await start(heads_app("edge"), ["127.0.0.1:0"], protocol=EdgeProtocol)
    sanic: Running = await start(heads_app("sanic"), ["127.0.0.1:0"], protocol=ServerProtocol)
    try:
        yield edge.ports[0], sanic.ports[0]
    finally:
        await edge.stop(1.0)
        await sanic.stop(1.0)


async def exchange(port: int, raw: bytes) -> bytes:
    """Everything the server sends for ``raw`` (its last request asks to close) until it closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    return data


def request(path: str, method: str = "GET", extra: str = "") -> bytes:
    return f"{method} {path} HTTP/1.1\r\nHost: localhost\r\n{extra}\r\n".encode()


@pytest.mark.parametrize("path", list(ANSWERS))
async def test_the_edge_sends_the_bytes_sanic_sends(servers: tuple[int, int], path: str) -> None:
    edge, sanic = servers
    # Twice on one keep-alive connection, a HEAD, then one that asks to close.
    raw = request(path) + request(path) + request(path, "HEAD") + request(path, extra="Connection: close\r\n")
    ours, theirs = await exchange(edge, raw), await exchange(sanic, raw)
    assert ours == theirs
    assert ours.count(b"HTTP/1.1 ") == 4


async def test_an_http_1_0_request_is_answered_as_sanic_answers_it(servers: tuple[int, int]) -> None:
    edge, sanic = servers
    raw = b"GET /plain HTTP/1.0\r\nHost: localhost\r\n\r\n"
    ours, theirs = await exchange(edge, raw), await exchange(sanic, raw)
    assert ours == theirs
    assert b"\r\nconnection: close\r\n" in ours


def test_what_sanic_must_write_is_left_to_it() -> None:
    """response_head answers None wherever Sanic changes or refuses something (the table above has each
    case over a socket; this names which of them the one-pass head leaves to Sanic)."""
    from sanic.compat import Header

    def head(status: int, headers: Mapping[str, object], content_type: str | None = JSON) -> bytes | None:
        return response_head(status, Header(headers), content_type, 2, True)

    assert head(200, {"X-Request-Id": "req_1"}) == (
        b"HTTP/1.1 200 OK\r\nX-Request-Id: req_1\r\ncontent-length: 2\r\nconnection: keep-alive\r\n"
        b"content-type: application/json\r\n\r\n"
    )
    for status in (100, 101, 199, 204, 304, 412):
        assert head(status, {}) is None
    for headers in (
        {"Content-Length": "2"},
        {"connection": "close"},
        {"Transfer-Encoding": "chunked"},
        {"X-A": "a\r\nb"},
        {"X-A": "a\nb"},
        {"X-A": "a\rb"},
        {"X-A": "a\x00b"},
        {"X-A": "caf\u00e9"},
        {"X-\u00e9": "a"},
    ):
        assert head(200, headers) is None, headers
    assert head(True, {}) is None  # not an int (a bool): Sanic's own checks
