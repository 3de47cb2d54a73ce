"""The egress proxy (``--egress-proxy``) at the transport: deliveries tunnel through a real CONNECT proxy
to the address the SSRF guard checked (never the name), connections are pooled through their tunnels, a
target the guard refuses never reaches the proxy, and a proxy that refuses the tunnel or is unreachable
is a failed attempt that says so."""

from __future__ import annotations

import asyncio
import datetime as dt
import pathlib
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from tests.support import free_port
from webhookd import Outcome, Policy
from webhookd._http import FastTransport
from webhookd._sender import Sender
from webhookd.testing import ConnectProxy, Receiver, trusted_receiver

NOW = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)


@pytest.fixture
async def proxy() -> AsyncIterator[ConnectProxy]:
    p = ConnectProxy()
    server = await asyncio.start_server(p.handle, "127.0.0.1", 0)
    p.port = server.sockets[0].getsockname()[1]
    yield p
    server.close()


@pytest.fixture
def receiver(tmp_path: pathlib.Path) -> Iterator[tuple[Receiver, pathlib.Path]]:
    r, ca = trusted_receiver(tmp_path)
    yield r, ca
    r.stop()


async def _send(transport: FastTransport, url: str) -> tuple[Outcome, str]:
    async with httpx.AsyncClient(transport=transport) as client:
        sent = await Sender(client, timeout=5, direct=transport).send(url, b"{}", ["whsec_x"], "evt_1", NOW)
    return sent.result, sent.error


async def test_deliveries_tunnel_to_the_checked_address_and_pool(
    proxy: ConnectProxy, receiver: tuple[Receiver, pathlib.Path]
) -> None:
    r, ca = receiver
    transport = FastTransport(Policy(allow_private=True), ca_bundle=str(ca), proxy=("127.0.0.1", proxy.port))
    # The URL names "localhost": the proxy is asked for the address webhookd resolved and checked.
    url = f"https://localhost:{r.port}/hook"
    async with httpx.AsyncClient(transport=transport) as client:
        sender = Sender(client, timeout=5, direct=transport)
        results = [await sender.send(url, b"{}", ["whsec_x"], f"evt_{i}", NOW) for i in range(20)]
    assert {s.result for s in results} == {Outcome.SUCCEEDED} and r.count == 20
    assert proxy.targets in ([f"127.0.0.1:{r.port}"], [f"[::1]:{r.port}"])  # one tunnel, reused
    assert r.connections == 1


async def test_a_refused_target_never_reaches_the_proxy(
    proxy: ConnectProxy, receiver: tuple[Receiver, pathlib.Path]
) -> None:
    r, ca = receiver
    transport = FastTransport(Policy(), ca_bundle=str(ca), proxy=("127.0.0.1", proxy.port))
    result, error = await _send(transport, f"https://127.0.0.1:{r.port}/hook")
    assert result is Outcome.NETWORK_ERROR and "loopback" in error
    assert proxy.targets == [] and r.count == 0


async def test_a_proxy_that_refuses_or_is_gone_fails_the_attempt(
    receiver: tuple[Receiver, pathlib.Path],
) -> None:
    r, ca = receiver

    async def refuse(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        writer.close()

    refusing = await asyncio.start_server(refuse, "127.0.0.1", 0)
    port = refusing.sockets[0].getsockname()[1]
    try:
        transport = FastTransport(Policy(allow_private=True), ca_bundle=str(ca), proxy=("127.0.0.1", port))
        result, error = await _send(transport, f"https://127.0.0.1:{r.port}/hook")
        assert result is Outcome.NETWORK_ERROR
        refused = f"the egress proxy refused the tunnel to 127.0.0.1:{r.port}: 'HTTP/1.1 403 Forbidden'"
        assert error == f"ConnectError: {refused}"
    finally:
        refusing.close()
    gone = FastTransport(Policy(allow_private=True), ca_bundle=str(ca), proxy=("127.0.0.1", free_port()))
    result, error = await _send(gone, f"https://127.0.0.1:{r.port}/hook")
    assert (
        result is Outcome.NETWORK_ERROR and "could not connect to the egress proxy" in error and r.count == 0
    )
