"""svckit.http's pooled transport against a real loopback server: keep-alive reuse, and a body longer
than ``max_body`` cut (webhookd reads at most so much) or refused (the edge passes answers on whole)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest

from svckit.http import PooledTransport, system_addresses

BODY = b"x" * 5000


Respond = Callable[[bytes, asyncio.StreamReader], Awaitable[bytes]]


@contextlib.asynccontextmanager
async def _serving(respond: Respond) -> AsyncIterator[tuple[int, list[int]]]:
    """A loopback HTTP/1.1 keep-alive server writing ``respond(head, reader)`` for each request head (it
    reads the body itself if it needs it); yields its port and its connections (one entry each)."""
    connections: list[int] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                writer.write(await respond(head, reader))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    srv = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield srv.sockets[0].getsockname()[1], connections
    finally:
        srv.close()
        await srv.wait_closed()


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, list[int]]]:
    """An HTTP/1.1 keep-alive server answering every request with BODY; counts its connections."""

    async def respond(_head: bytes, _reader: asyncio.StreamReader) -> bytes:
        return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%b" % (len(BODY), BODY)

    async with _serving(respond) as (port, connections):
        yield f"http://127.0.0.1:{port}/thing", connections


async def _get(transport: PooledTransport, url: str) -> httpx.Response:
    response = await transport.handle_async_request(httpx.Request("GET", url))
    await response.aread()
    return response


async def test_whole_bodies_on_one_kept_alive_connection(server: tuple[str, list[int]]) -> None:
    url, connections = server
    transport = PooledTransport(system_addresses, max_body=len(BODY), refuse_longer=True)
    try:
        for _ in range(3):
            response = await _get(transport, url)
            assert response.status_code == 200 and response.content == BODY
        assert len(connections) == 1
    finally:
        await transport.aclose()


async def test_a_longer_body_is_refused_when_asked_and_cut_otherwise(server: tuple[str, list[int]]) -> None:
    url, _ = server
    refusing = PooledTransport(system_addresses, max_body=1000, refuse_longer=True)
    cutting = PooledTransport(system_addresses, max_body=1000)
    try:
        with pytest.raises(httpx.ReadError, match="larger than 1000 bytes"):
            await _get(refusing, url)
        cut = await _get(cutting, url)
        assert cut.status_code == 200 and 0 < len(cut.content) <= len(BODY) and BODY.startswith(cut.content)
    finally:
        await refusing.aclose()
        await cutting.aclose()


async def test_an_unresolvable_host_is_a_connect_error() -> None:
    transport = PooledTransport(system_addresses)
    with pytest.raises(httpx.ConnectError):
        await _get(transport, "http://no-such-host.invalid/x")


async def test_the_proxy_fast_path_sends_one_formatted_head_and_refuses_a_line_break() -> None:
    """``PooledTransport.request`` (the edge's proxied requests): the head as written, the base URL's
    path prefix kept, the pooled connection reused; a header value with CR or LF is never sent."""
    heads: list[bytes] = []

    async def respond(head: bytes, _reader: asyncio.StreamReader) -> bytes:
        heads.append(head)
        return b"HTTP/1.1 201 Created\r\nContent-Type: text/x\r\nContent-Length: 2\r\n\r\nok"

    async with (
        _serving(respond) as (port, _),
        contextlib.aclosing(PooledTransport(system_addresses)) as transport,
    ):
        base = f"http://127.0.0.1:{port}/prefix"
        for _ in range(2):
            status, headers, body = await transport.request("GET", base, "/v1/x?a=1", [("X-Key-Id", "k")])
            assert (status, body) == (201, b"ok") and (b"Content-Type", b"text/x") in headers
        assert (
            heads
            == [f"GET /prefix/v1/x?a=1 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Key-Id: k\r\n\r\n".encode()]
            * 2
        )
        assert transport.connections_opened == 1
        for value in ("a\r\nX-Injected: 1", "a\nb", "a\rb"):
            with pytest.raises(httpx.LocalProtocolError):
                await transport.request("GET", base, "/v1/x", [("X-Key-Id", value)])
        with pytest.raises(httpx.LocalProtocolError):
            await transport.request("HEAD", base, "/v1/x", [])
        assert len(heads) == 2


async def test_post_returns_the_first_keep_bytes_of_a_plain_or_chunked_answer() -> None:
    """webhookd keeps 4 KiB of an answer: ``post`` hands back only the first ``keep`` bytes, read whole
    (up to ``max_body``) so the connection is reused, whether the answer is plain (Content-Length) or
    chunked (through h11)."""
    answers = [
        b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%b" % (len(BODY), BODY),
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        + b"".join(b"%x\r\n%b\r\n" % (1000, BODY[i : i + 1000]) for i in range(0, len(BODY), 1000))
        + b"0\r\n\r\n",
    ]

    turns = itertools.cycle(answers)

    async def respond(head: bytes, reader: asyncio.StreamReader) -> bytes:
        length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
        await reader.readexactly(length)
        return next(turns)

    async with (
        _serving(respond) as (port, _),
        contextlib.aclosing(PooledTransport(system_addresses)) as transport,
    ):
        url = f"http://127.0.0.1:{port}/hook"
        for _ in range(2):  # plain, then chunked
            status, _, body = await transport.post(url, {"X-A": "1"}, b"{}", keep=100)
            assert (status, body) == (200, BODY[:100])
        status, _, body = await transport.post(url, {}, b"{}")  # keep unset: the whole body
        assert (status, body) == (200, BODY)
        assert transport.connections_opened == 1
