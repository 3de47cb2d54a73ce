"""Connection limits (svckit.connlimits) at the portal over real sockets (issue 34: the made-up-key flood
of many addresses took a signed-in owner's pages from 64 ms to 2 s). Each client binds its own loopback
address. Past its address's cap a new connection is answered 429 at once and closed while a signed-in
user's pages are served; a connection without a session idles briefly, one with a session keeps its
keep-alive. And a head the portal cannot read as a request is answered, without a traceback: a request
line over the head's limit 414, a control byte in the target 400."""

# ruff: noqa: F811 (the tests take the fixtures imported below as arguments)

from __future__ import annotations

import asyncio
import logging
from urllib.parse import urlsplit

import pytest

from svckit import webserver
from svckit.connlimits import ConnectionLimits
from tests.integration.portal_stack import Stack, stack  # noqa: F401

PER_ADDRESS = 3
ANONYMOUS_KEEP_ALIVE = 0.5
WAIT = 15.0


@pytest.fixture
def tight(monkeypatch: pytest.MonkeyPatch) -> None:
    """The limits the stack's portal starts with (svckit.webserver.start's default)."""
    limits = ConnectionLimits(per_source=PER_ADDRESS, anonymous_keep_alive=ANONYMOUS_KEEP_ALIVE)
    monkeypatch.setattr(webserver, "ConnectionLimits", lambda: limits)


Conn = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def open_from(stack: Stack, address: str) -> Conn:
    url = urlsplit(stack.url)
    return await asyncio.open_connection(url.hostname, url.port, local_addr=(address, 0))


async def ask(conn: Conn, path: str, cookie: str = "") -> bytes:
    """One GET on ``conn``: the answer's head, lower-cased (its body read and dropped)."""
    reader, writer = conn
    extra = f"Cookie: {cookie}\r\n" if cookie else ""
    writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{extra}\r\n".encode())
    head = (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), WAIT)).lower()
    length = int(next(h for h in head.split(b"\r\n") if h.startswith(b"content-length:")).split(b":")[1])
    await reader.readexactly(length)
    return head


async def until_closed(conn: Conn) -> bytes:
    return await asyncio.wait_for(conn[0].read(), WAIT)


async def test_an_address_past_its_cap_is_refused_while_a_signed_in_user_is_served(
    tight: None,
    stack: Stack,
) -> None:
    user = await stack.join("owner@acme.example")
    held = [await open_from(stack, "127.0.5.1") for _ in range(PER_ADDRESS)]
    try:
        refused = await open_from(stack, "127.0.5.1")
        answer = await until_closed(refused)
        assert answer.startswith(b"HTTP/1.1 429 "), answer
        assert b"Connection: close" in answer and b"your address" in answer
        refused[1].close()
        other = await open_from(stack, "127.0.5.2")
        assert (await ask(other, "/signin")).startswith(b"http/1.1 200 ")
        other[1].close()
        for _ in range(3):
            assert (await user.get("/live/keys")).status_code == 200
    finally:
        for _, writer in held:
            writer.close()
        await user.aclose()


async def test_without_a_session_a_connection_idles_briefly_and_with_one_keeps_its_keep_alive(
    tight: None,
    stack: Stack,
) -> None:
    user = await stack.join("owner@acme.example")
    cookie = f"portal_session={user.cookies['portal_session']}"
    try:
        anonymous = await open_from(stack, "127.0.8.1")
        signed_in = await open_from(stack, "127.0.8.2")
        head = await ask(anonymous, "/signin")
        assert head.startswith(b"http/1.1 200 ") and b"connection: keep-alive" in head
        assert (await ask(signed_in, "/live/keys", cookie)).startswith(b"http/1.1 200 ")
        assert await until_closed(anonymous) == b""  # closed idle at the short keep-alive
        await asyncio.sleep(4 * ANONYMOUS_KEEP_ALIVE)
        assert (await ask(signed_in, "/live/keys", cookie)).startswith(b"http/1.1 200 ")
        anonymous[1].close()
        signed_in[1].close()
    finally:
        await user.aclose()


@pytest.mark.parametrize(
    ("target", "status"),
    [
        (b"/" + b"a" * 9 * 1024, b"414"),
        (b"/live/keys" + b"a" * 64 * 1024, b"414"),
        (b"/live/keys\x01", b"400"),
        (b"/a\x00b", b"400"),
        (b"/signin?next=\x1b", b"400"),
    ],
    ids=["9k", "64k", "control", "nul", "escape-in-query"],
)
async def test_an_unreadable_target_is_answered_without_a_traceback(
    stack: Stack, target: bytes, status: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    reader, writer = await open_from(stack, "127.0.0.1")
    writer.write(b"GET " + target + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    answer = await until_closed((reader, writer))
    writer.close()
    assert answer.startswith(b"HTTP/1.1 " + status + b" "), answer[:300]
    assert b"connection: close" in answer.lower()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
