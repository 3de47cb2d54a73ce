"""webhookd's HTTP/1.1 transport against small real servers on loopback: keep-alive reuse, interim 1xx
responses, chunked and close-delimited bodies, malformed and cut-off responses, long bodies, a pooled
connection the server closed, and the SSRF check at connect."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from webhookd import Outcome, Policy
from webhookd._http import FastTransport
from webhookd._sender import RESPONSE_KEEP, Sender, SendResult

DEV = Policy(allow_http=True, allow_private=True)
Reply = Callable[[int], bytes]


class Server:
    """Answers each request with ``reply(n)`` (n counts requests across connections), as raw bytes."""

    def __init__(self, reply: Reply, close_after: bool = False) -> None:
        self.reply = reply
        self.close_after = close_after
        self.requests = 0
        self.connections = 0
        self.server: asyncio.Server | None = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.decode().split("\r\n"):
                    if line.lower().startswith("content-length:"):
                        length = int(line.split(":")[1])
                await reader.readexactly(length)
                self.requests += 1
                writer.write(self.reply(self.requests))
                await writer.drain()
                if self.close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/hook"


@pytest.fixture
async def serve() -> AsyncIterator[Callable[..., object]]:
    servers: list[Server] = []

    async def start(reply: Reply, close_after: bool = False) -> Server:
        s = Server(reply, close_after)
        s.server = await asyncio.start_server(s.handle, "127.0.0.1", 0)
        servers.append(s)
        return s

    yield start
    for s in servers:
        assert s.server is not None
        s.server.close()


async def test_keep_alive_chunked_and_content_length(serve) -> None:
    def reply(n: int) -> bytes:
        if n % 2:
            return b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
        return b"HTTP/1.1 503 Busy\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nbusy\r\n3\r\n!!!\r\n0\r\n\r\n"

    server = await serve(reply)
    transport = FastTransport(DEV)
    async with httpx.AsyncClient(transport=transport) as client:
        answers = [await client.post(server.url, content=b"{}") for _ in range(4)]
    assert [(r.status_code, r.text) for r in answers] == [(200, "ok"), (503, "busy!!!")] * 2
    assert server.connections == 1 and transport.connections_opened == 1


async def _deliver(transport: FastTransport, url: str) -> SendResult:
    """One delivery as the worker sends it (the pool lives in ``transport``, across deliveries)."""
    sender = Sender(httpx.AsyncClient(transport=transport), direct=transport)
    return await sender.send(url, b"{}", ["whsec_x"], "evt_1", dt.datetime.now(dt.UTC))


async def test_early_hints_then_final_response_stays_with_its_delivery(serve) -> None:
    # Delivery 1 gets 103 Early Hints and then its 200; delivery 2 on the same pooled connection gets 500.
    # A parser that takes the 103 as the answer leaves the 200 unread, records delivery 1 as failed (103)
    # and hands the 200 to delivery 2, which is then marked succeeded.
    def reply(n: int) -> bytes:
        if n == 1:
            return (
                b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
                b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\nX-Receipt: r1\r\n\r\nstored"
            )
        return b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\nboom"

    server = await serve(reply)
    transport = FastTransport(DEV)
    first = await _deliver(transport, server.url)
    second = await _deliver(transport, server.url)
    assert (first.result, first.status, first.body) == (Outcome.SUCCEEDED, 200, "stored")
    assert first.response_headers == {"content-length": "6", "x-receipt": "r1"}
    assert (second.result, second.status, second.body) == (Outcome.HTTP_ERROR, 500, "boom")
    assert server.connections == 1 and transport.connections_opened == 1


async def test_several_interim_responses_then_chunked_with_trailers(serve) -> None:
    server = await serve(
        lambda n: (
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
            b"HTTP/1.1 202 Accepted\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"3;ext=1\r\nsto\r\n3\r\nred\r\n0\r\nX-Trailer: t\r\n\r\n"
        )
    )
    transport = FastTransport(DEV)
    async with httpx.AsyncClient(transport=transport) as client:
        answers = [await client.post(server.url, content=b"{}") for _ in range(3)]
    assert [(r.status_code, r.text) for r in answers] == [(202, "stored")] * 3
    assert transport.connections_opened == 1


async def test_conflicting_content_lengths_fail_and_the_connection_is_not_reused(serve) -> None:
    def reply(n: int) -> bytes:
        if n == 1:
            return b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 7\r\n\r\nok"
        return b"HTTP/1.1 204 No Content\r\n\r\n"

    server = await serve(reply)
    transport = FastTransport(DEV)
    first = await _deliver(transport, server.url)
    assert first.result is Outcome.NETWORK_ERROR and "Content-Length" in first.error
    second = await _deliver(transport, server.url)
    assert (second.result, second.status) == (Outcome.SUCCEEDED, 204)
    assert server.connections == 2 and transport.connections_opened == 2


async def test_server_closing_mid_body_is_a_failure(serve) -> None:
    server = await serve(lambda n: b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial", close_after=True)
    transport = FastTransport(DEV)
    for _ in range(2):
        result = await _deliver(transport, server.url)
        assert result.result is Outcome.NETWORK_ERROR and result.status == 0
    chunked = await serve(
        lambda n: b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel", close_after=True
    )
    result = await _deliver(transport, chunked.url)
    assert result.result is Outcome.NETWORK_ERROR


async def test_long_response_kept_to_4_kib_and_the_connection_reused(serve) -> None:
    long = b"a" * 3000 + b"b" * 20000

    def reply(n: int) -> bytes:
        if n % 2:
            return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(long), long)
        chunks = b"".join(
            b"%x\r\n%s\r\n" % (len(long[i : i + 1000]), long[i : i + 1000]) for i in range(0, len(long), 1000)
        )
        return b"HTTP/1.1 400 Bad Request\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks + b"0\r\n\r\n"

    server = await serve(reply)
    transport = FastTransport(DEV)
    results = [await _deliver(transport, server.url) for _ in range(4)]
    assert RESPONSE_KEEP == 4096
    for r in results:
        assert r.body == (long[:4096]).decode()
    assert [r.status for r in results] == [200, 400, 200, 400]
    assert server.connections == 1


async def test_bytes_nobody_asked_for_never_reach_the_next_request(serve) -> None:
    # Two responses to one request: the second must not be taken as the next request's answer.
    def reply(n: int) -> bytes:
        if n == 1:
            return b"HTTP/1.1 500 X\r\nContent-Length: 0\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
        return b"HTTP/1.1 503 X\r\nContent-Length: 0\r\n\r\n"

    server = await serve(reply)
    transport = FastTransport(DEV)
    assert [(await _deliver(transport, server.url)).status for _ in range(2)] == [500, 503]
    assert transport.connections_opened == 2


async def test_response_headers_are_capped(serve) -> None:
    many = b"".join(b"X-H%03d: %s\r\n" % (i, b"v" * 90) for i in range(200))
    server = await serve(lambda n: b"HTTP/1.1 200 OK\r\n" + many + b"Content-Length: 0\r\n\r\n")
    result = await _deliver(FastTransport(DEV), server.url)
    kept = result.response_headers
    assert result.status == 200 and 0 < sum(len(k) + len(v) for k, v in kept.items()) <= 4096
    assert list(kept)[:2] == ["x-h000", "x-h001"] and "content-length" not in kept


@pytest.mark.parametrize(
    "head",
    [
        b"HTTP/1.1 202 Accepted\r\nConnection: close\r\n\r\n",
        # No Content-Length, not chunked, no Connection: close: the body still runs to the end of the
        # connection (RFC 9112 6.3), which is then not reused.
        b"HTTP/1.1 202 Accepted\r\nContent-Type: text/plain\r\n\r\n",
    ],
)
async def test_close_delimited_bodies(serve, head: bytes) -> None:
    server = await serve(lambda n: head + b"stored", close_after=True)
    transport = FastTransport(DEV)
    async with httpx.AsyncClient(transport=transport) as client:
        for _ in range(3):
            r = await client.post(server.url, content=b"{}")
            assert (r.status_code, r.text) == (202, "stored")
    assert server.connections == 3 and transport.connections_opened == 3


async def test_pooled_connection_closed_by_server_is_retried_fresh(serve) -> None:
    # Advertises keep-alive, then closes anyway: the next request finds a dead pooled connection.
    server = await serve(lambda n: b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", close_after=True)
    transport = FastTransport(DEV)
    async with httpx.AsyncClient(transport=transport) as client:
        for _ in range(3):
            assert (await client.post(server.url, content=b"{}")).status_code == 200
            await asyncio.sleep(0.05)
    assert server.requests == 3


async def test_ssrf_checked_at_connect() -> None:
    async with httpx.AsyncClient(transport=FastTransport(Policy(allow_http=True))) as client:
        with pytest.raises(httpx.ConnectError, match="loopback"):
            await client.post("http://127.0.0.1:9/hook", content=b"{}")

    async def rebinding(host: str, port: int) -> list[str]:
        return ["10.0.0.8"]

    async with httpx.AsyncClient(transport=FastTransport(Policy(), resolver=rebinding)) as client:
        with pytest.raises(httpx.ConnectError, match="private"):
            await client.post("https://hooks.partner.test/hook", content=b"{}")


async def test_embedded_and_metadata_targets_refused_at_connect() -> None:
    async with httpx.AsyncClient(transport=FastTransport(Policy(allow_http=True))) as client:
        for url in ("http://[::7f00:1]:9/hook", "http://[::ffff:0:7f00:1]:9/", "http://[fec0::1]:9/"):
            with pytest.raises(httpx.ConnectError, match=r"loopback|site-local"):
                await client.post(url, content=b"{}")

    async def to_metadata(host: str, port: int) -> list[str]:
        return ["::ffff:169.254.169.254"]

    # Development flags open loopback and private ranges, never the metadata service.
    async with httpx.AsyncClient(transport=FastTransport(DEV, resolver=to_metadata)) as client:
        with pytest.raises(httpx.ConnectError, match="metadata"):
            await client.post("http://metadata.google.internal/computeMetadata/v1/", content=b"{}")
        with pytest.raises(httpx.ConnectError, match="metadata"):
            await client.post("http://169.254.169.254/latest", content=b"{}")


def _tls_receiver(tmp_path, delay: float = 0.0):
    import ssl
    import uuid

    import trustme

    from webhookd.testing import Receiver

    ca = trustme.CA()
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(ctx)
    # A unique name: id(ca) can repeat once the first CA object is freed, overwriting the first bundle.
    path = tmp_path / f"ca-{uuid.uuid4().hex}.pem"
    ca.cert_pem.write_to_path(str(path))
    receiver = Receiver(ctx).start()
    receiver.delay = delay
    return receiver, str(path)


async def test_tls_is_verified_against_the_configured_bundle(tmp_path) -> None:
    receiver, trusted = _tls_receiver(tmp_path)
    _other, untrusted = _tls_receiver(tmp_path)
    try:
        async with httpx.AsyncClient(transport=FastTransport(DEV, ca_bundle=trusted)) as client:
            assert (await client.post(receiver.url(), content=b"{}")).status_code == 200
        for bundle in (untrusted, None):  # another CA, or the system store: both refuse this certificate
            async with httpx.AsyncClient(transport=FastTransport(DEV, ca_bundle=bundle)) as client:
                with pytest.raises(httpx.ConnectError, match="TLS"):
                    await client.post(receiver.url(), content=b"{}")
        assert receiver.count == 1
    finally:
        receiver.stop()
        _other.stop()


async def test_slow_endpoint_is_a_timeout(tmp_path) -> None:
    import datetime as dt

    from webhookd import Outcome
    from webhookd._sender import Sender

    receiver, trusted = _tls_receiver(tmp_path, delay=2.0)
    try:
        transport = FastTransport(DEV, ca_bundle=trusted)
        async with httpx.AsyncClient(transport=transport) as client:
            sender = Sender(client, timeout=0.3, direct=transport)
            result = await sender.send(receiver.url(), b"{}", ["whsec_x"], "evt_1", dt.datetime.now(dt.UTC))
        assert result.result is Outcome.TIMEOUT and result.status == 0 and "0.3 s" in result.error
    finally:
        receiver.stop()
