"""svckit.http's proxy fast path (``PooledTransport.request``) against a scripted loopback server: plain
answers read without h11, every other framing handed to h11 from its first byte, the connection reused
only after a whole answer with nothing after it, and the answer's deadline."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from svckit.http import PooledTransport, system_addresses

# (bytes written in pieces, close the connection after them)
Answer = tuple[list[bytes], bool]


class Scripted:
    """Answers each request head with the next scripted answer; ``hang`` answers nothing."""

    def __init__(self) -> None:
        self.answers: list[Answer] = []
        self.heads = 0
        self.port = 0
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> Scripted:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await reader.readuntil(b"\r\n\r\n"):
                self.heads += 1
                pieces, close = self.answers.pop(0)
                for piece in pieces:
                    writer.write(piece)
                    await writer.drain()
                    await asyncio.sleep(0.001)
                if close:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@pytest.fixture
async def scripted() -> AsyncIterator[Scripted]:
    async with Scripted() as server:
        yield server


def _bytewise(answer: bytes) -> list[bytes]:
    return [answer[i : i + 1] for i in range(len(answer))]


async def _get(
    transport: PooledTransport, server: Scripted, within: float | None = None
) -> tuple[int, bytes]:
    status, _headers, body = await transport.request(
        "GET", f"http://127.0.0.1:{server.port}", "/x", [], answer_within=within
    )
    return status, body


async def test_plain_and_other_framings_alike_on_one_kept_alive_connection(scripted: Scripted) -> None:
    scripted.answers = [
        (_bytewise(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: b\r\n\r\nhello"), False),
        (
            [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n", b"2\r\nde\r\n0\r\n\r\n"],
            False,
        ),
        ([b"HTTP/1.1 100 Continue\r\n\r\n", b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok"], False),
        ([b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"], False),
        ([b"HTTP/1.1 200 OK\r\ncontent-length:0\r\n\r\n"], False),
    ]
    transport = PooledTransport(system_addresses)
    try:
        got = [await _get(transport, scripted) for _ in range(5)]
        assert got == [(200, b"hello"), (200, b"abcde"), (201, b"ok"), (204, b""), (200, b"")]
        assert transport.connections_opened == 1
    finally:
        await transport.aclose()


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA",  # bytes no request asked for
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
    ],
)
async def test_a_connection_is_not_reused_after_extra_bytes_or_close(
    scripted: Scripted, answer: bytes
) -> None:
    scripted.answers = [([answer], False), ([b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"], False)]
    transport = PooledTransport(system_addresses)
    try:
        assert await _get(transport, scripted) == (200, b"ok")
        assert await _get(transport, scripted) == (200, b"ok")
        assert transport.connections_opened == 2
    finally:
        await transport.aclose()


async def test_a_close_delimited_body_is_read_to_the_end(scripted: Scripted) -> None:
    scripted.answers = [([b"HTTP/1.1 200 OK\r\nX-A: 1\r\n\r\n", b"all of ", b"it"], True)]
    transport = PooledTransport(system_addresses)
    try:
        assert await _get(transport, scripted) == (200, b"all of it")
    finally:
        await transport.aclose()


async def test_a_server_closing_an_idle_connection_is_retried_once(scripted: Scripted) -> None:
    scripted.answers = [([b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na"], True)] * 2
    transport = PooledTransport(system_addresses)
    try:
        assert await _get(transport, scripted) == (200, b"a")
        await asyncio.sleep(0.05)  # the close reaches the pooled connection
        assert await _get(transport, scripted) == (200, b"a")
        assert transport.connections_opened == 2
    finally:
        await transport.aclose()


@pytest.mark.parametrize(
    "answer",
    [
        [b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok"],  # conflicting lengths
        [b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"],  # closed before the whole body
        [b"HTTP/1.1 200 OK\r\nX-A: a\x00b\r\nContent-Length: 2\r\n\r\nok"],
        [b"HTTP/1.1 200 OK\r\n"],  # closed inside the head
        [b"HTTP/1.1 200 OK\r\nX-A: " + b"a" * 70_000 + b"\r\nContent-Length: 2\r\n\r\nok"],  # head too long
        [],  # closed without a byte
    ],
)
async def test_a_broken_answer_is_a_protocol_error(scripted: Scripted, answer: list[bytes]) -> None:
    scripted.answers = [(answer, True)]
    transport = PooledTransport(system_addresses)
    try:
        with pytest.raises(httpx.RemoteProtocolError):
            await _get(transport, scripted)
    finally:
        await transport.aclose()


async def test_a_longer_body_is_refused_or_cut_on_the_fast_path(scripted: Scripted) -> None:
    body = b"x" * 3000
    answer = [b"HTTP/1.1 200 OK\r\nContent-Length: 3000\r\n\r\n", body]
    scripted.answers = [(answer, False), (answer, False)]
    refusing = PooledTransport(system_addresses, max_body=1000, refuse_longer=True)
    cutting = PooledTransport(system_addresses, max_body=1000)
    try:
        with pytest.raises(httpx.ReadError, match="larger than 1000 bytes"):
            await _get(refusing, scripted)
        assert await _get(cutting, scripted) == (200, body[:1000])
        assert not cutting._idle[("http", "127.0.0.1", scripted.port, "")]  # the rest unread: closed
    finally:
        await refusing.aclose()
        await cutting.aclose()


async def test_an_answer_past_its_deadline_is_a_timeout_and_the_transport_goes_on(scripted: Scripted) -> None:
    scripted.answers = [([b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhe"], False)]  # never the rest
    transport = PooledTransport(system_addresses)
    try:
        with pytest.raises(httpx.TimeoutException):
            await _get(transport, scripted, within=0.2)
        scripted.answers = [([b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"], False)]
        assert await _get(transport, scripted, within=30) == (200, b"ok")
        assert transport.connections_opened == 2  # the late connection was not pooled
        assert not transport._deadlines
    finally:
        await transport.aclose()
