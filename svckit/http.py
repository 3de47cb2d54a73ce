"""A lean HTTP/1.1 client transport for httpx: a keep-alive connection pool per origin, responses parsed
by h11. webhookd delivers through it (with its SSRF guard choosing the addresses), the edge proxies to
the product upstreams through it.

Why not httpx's default transport: httpcore's pool rescans every connection on every request
(quadratic in pool size) and each request passes several anyio layers; on a small machine that capped
webhook deliveries at a few hundred per second, and made a proxied product GET cost the edge 1.25 ms of
CPU. This transport keeps its own pool and connects to the addresses its ``addresses`` function gives,
with TLS SNI, certificate verification and Host still using the URL's name. Responses are parsed by h11
(one ``h11.Connection`` per pooled connection, reused with ``start_next_cycle``), which handles interim
1xx responses, chunked and close-delimited bodies and refuses conflicting ``Content-Length`` headers. A
connection goes back to the pool only when h11 says both sides are done, nothing unread follows the
response and nothing arrived while it was idle, so no response can be read by the wrong request. Bodies
are handed over as received: de-chunked, never decompressed (ask for ``Accept-Encoding: identity``).

The proxy fast path (``request``) reads an answer of the plain shape (``svckit.responsehead``: HTTP/1.1,
a final status, one ``Content-Length``) without h11, and hands any other answer to h11 from its first
byte; its deadline is kept by one sweep per transport (``DEADLINE_SWEEP``) rather than a timer per request.
"""

from __future__ import annotations

import asyncio
import functools
import socket
import ssl
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import cast
from urllib.parse import urlsplit

import h11
import httpx

from svckit.responsehead import plain_head

__all__ = ["MAX_BODY_READ", "Addresses", "ClientTls", "PooledTransport", "system_addresses"]

MAX_HEAD = 64 * 1024
# Read at most this much of a response body by default (keeping only what the caller asked for).
MAX_BODY_READ = 1024 * 1024
# How often ``request``'s answer deadlines are checked: a late answer is given up at most this much
# after its deadline. One timer per transport while requests wait, instead of one per request.
DEADLINE_SWEEP = 0.05

# (scheme, host, port, identity): connections made with another TLS client identity (a client
# certificate, ``request``'s ``tls``) are pooled apart; "" is the transport's own context.
Origin = tuple[str, str, int, str]
Headers = list[tuple[bytes, bytes]]  # as received (h11 raw_items: names in their own case)
# (host, port) -> the addresses to try, in order; raises httpx.ConnectError to refuse the host, OSError
# when it does not resolve.
Addresses = Callable[[str, int], Awaitable[list[str]]]

# The fast path (``request``, and ``post`` over it) formats its own request bytes (no Expect, no
# ``Connection: close``); an answer that is not plain goes to h11, told about the request with this one
# pre-validated event of the same framing: building and validating an h11.Request per request would cost
# more than the rest of the send.
_POST = h11.Request(method=b"POST", target=b"/", headers=[(b"host", b"-"), (b"content-length", b"0")])
_END = h11.EndOfMessage()


async def system_addresses(host: str, port: int) -> list[str]:
    """The system resolver's addresses of ``host``, each once, in its order; OSError if none."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    out: list[str] = []
    for _family, _type, _proto, _canon, sockaddr in infos:
        addr = str(sockaddr[0]).split("%", 1)[0]
        if addr not in out:
            out.append(addr)
    return out


class _Conn(asyncio.Protocol):
    """One pooled connection: the socket's bytes go straight into its h11 state machine."""

    def __init__(self) -> None:
        self.h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD)
        self.transport: asyncio.Transport | None = None
        self.received = 0  # bytes received since the current request was written
        self.lost = False
        self.eof = False
        self.idle_since = 0.0
        # The answer's bytes while ``request`` reads a plain head itself (else they go to h11).
        self.raw: bytearray | None = None
        self._waiter: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.received += len(data)
        if self.raw is not None:
            self.raw += data
        else:
            self.h11.receive_data(data)
        self._wake()

    def eof_received(self) -> bool:
        self.eof = True
        if self.raw is None:
            self.h11.receive_data(b"")
        self._wake()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if self.raw is None:
            self.h11.receive_data(b"")
        self._wake()

    def to_h11(self) -> None:
        """Hand what ``request`` read so far to a fresh h11 machine told of a request (any framing)."""
        # The pre-validated POST event: a response is framed alike for every method but HEAD and CONNECT.
        h = self.h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD)
        h.send(_POST)
        h.send(_END)
        raw, self.raw = self.raw, None
        if raw:
            h.receive_data(bytes(raw))
        if self.eof or self.lost:
            h.receive_data(b"")

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def expire(self) -> None:
        """The answer's deadline passed: the waiting exchange raises TimeoutError."""
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(TimeoutError())

    async def wait(self) -> None:
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    def reusable(self) -> bool:
        """Open and quiet: h11 is ready for a new request and no byte arrived since the last response."""
        h = self.h11
        return not (self.lost or self.eof) and h.our_state is h11.IDLE and not h.trailing_data[0]

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


@functools.lru_cache(maxsize=4096)
def _split(url: str) -> tuple[str, str, int, str]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        raise httpx.UnsupportedProtocol(f"not an http(s) URL: {url[:100]!r}")
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    return scheme, parts.hostname, parts.port or (443 if scheme == "https" else 80), target


@functools.lru_cache(maxsize=4096)
def _base(base: str, identity: str = "") -> tuple[Origin, str, str]:
    """(origin, path prefix without its last slash, the head's text from the version to the Host line)."""
    scheme, host, port, prefix = _split(base)
    name = f"[{host}]" if ":" in host else host
    host_line = f" HTTP/1.1\r\nHost: {name if port in (80, 443) else f'{name}:{port}'}\r\n"
    return (scheme, host, port, identity), ("" if prefix == "/" else prefix.rstrip("/")), host_line


class _Reused(Exception):
    """A pooled connection turned out to be closed by the peer before answering."""


def _answer_error(exc: Exception, conn: _Conn, *, reused: bool) -> Exception:
    """The one mapping of a broken answer to httpx's errors (as httpx's ``map_httpcore_exceptions``). A
    reused connection that broke before any byte of the answer gives ``_Reused``: the caller tries a
    fresh one (the origin most likely closed it while it was idle)."""
    if reused and not conn.received:
        return _Reused()
    if isinstance(exc, h11.RemoteProtocolError):
        return httpx.RemoteProtocolError(f"invalid response: {exc}")
    return httpx.ReadError(f"connection lost: {exc}")


@dataclass(frozen=True, slots=True)
class ClientTls:
    """A TLS context of one request's own (e.g. holding a client certificate) and the identity its
    connections are pooled under (never shared with another identity's requests)."""

    context: ssl.SSLContext
    identity: str


class _TunnelHead(asyncio.Protocol):
    """Reads an HTTP CONNECT proxy's answer head."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if len(self.buf) > MAX_HEAD or b"\r\n\r\n" in self.buf:
            self._finish(None)

    def eof_received(self) -> bool:
        self._finish(ConnectionError("the proxy closed the connection"))
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._finish(ConnectionError("the proxy closed the connection"))

    def _finish(self, exc: Exception | None) -> None:
        if not self.done.done():
            if exc is None:
                self.done.set_result(None)
            else:
                self.done.set_exception(exc)


async def _tunnel(
    proxy: tuple[str, int], addr: str, port: int, host: str, context: ssl.SSLContext | None
) -> _Conn:
    """A connection to ``addr``:``port`` through an HTTP CONNECT proxy (TLS inside the tunnel, verified
    for ``host``). The proxy is asked for the checked address, never the name: it cannot resolve the
    name elsewhere (DNS rebinding). Raises httpx.ConnectError when the proxy refuses, OSError when it is
    unreachable."""
    loop = asyncio.get_running_loop()
    transport, head = await loop.create_connection(_TunnelHead, *proxy)
    try:
        target = f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"
        transport.write(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode("ascii"))
        try:
            await head.done
        except ConnectionError:
            raise httpx.ConnectError(f"the egress proxy closed the tunnel to {host}:{port}") from None
        end = head.buf.find(b"\r\n\r\n")
        status_line = bytes(head.buf[: head.buf.find(b"\r\n")])
        parts = status_line.split(b" ", 2)
        ok = end >= 0 and len(parts) >= 2 and parts[0].startswith(b"HTTP/1.") and parts[1] == b"200"
        if not ok or len(head.buf) != end + 4:
            shown = status_line[:100].decode("ascii", "replace")
            raise httpx.ConnectError(f"the egress proxy refused the tunnel to {host}:{port}: {shown!r}")
        conn = _Conn()
        if context is None:
            transport.set_protocol(conn)
            conn.connection_made(transport)
        else:
            tls_transport = await loop.start_tls(transport, conn, context, server_hostname=host)
            assert tls_transport is not None
            conn.connection_made(tls_transport)
        return conn
    except BaseException:
        transport.close()
        raise


class PooledTransport(httpx.AsyncBaseTransport):
    """The transport. ``addresses(host, port)`` gives the addresses to connect to (raising
    httpx.ConnectError to refuse one); a body longer than ``max_body`` is cut there (``refuse_longer``
    False: the caller reads at most that much, as webhookd does) or refused with httpx.ReadError. With
    ``proxy`` every connection goes through that HTTP CONNECT proxy (``_tunnel``)."""

    def __init__(
        self,
        addresses: Addresses,
        *,
        ca_bundle: str | None = None,
        max_idle_per_origin: int = 256,
        keepalive_expiry: float = 30.0,
        max_body: int = MAX_BODY_READ,
        refuse_longer: bool = False,
        proxy: tuple[str, int] | None = None,
    ) -> None:
        self.addresses = addresses
        # An HTTP CONNECT proxy every connection is tunnelled through (to the address ``addresses`` chose).
        self.proxy = proxy
        self.max_body = max_body
        self.refuse_longer = refuse_longer
        self.ca_bundle = ca_bundle
        self.ssl_context = ssl.create_default_context(cafile=ca_bundle)
        self.max_idle = max_idle_per_origin
        self.keepalive_expiry = keepalive_expiry
        self._idle: dict[Origin, list[_Conn]] = defaultdict(list)
        self.connections_opened = 0
        self._deadlines: dict[_Conn, float] = {}  # ``request``'s exchanges under way
        self._sweeper: asyncio.TimerHandle | None = None

    async def post(
        self,
        url: str,
        headers: dict[str, str],
        body: bytes,
        keep: int | None = None,
        *,
        tls: ClientTls | None = None,
    ) -> tuple[int, Headers, bytes]:
        """The webhook delivery fast path: ``request``'s POST to a whole URL (its path and query the target).

        Returns (status, response headers, the first ``keep`` bytes of the body as received, de-chunked);
        raises httpx errors like the transport. ``tls``: another TLS context for this request (a client
        certificate) and the identity its connections are pooled under.
        """
        scheme, host, port, target = _split(url)
        name = f"[{host}]" if ":" in host else host
        base = f"{scheme}://{name}:{port}"
        return await self.request("POST", base, target, [*headers.items()], body, keep=keep, tls=tls)

    async def request(
        self,
        method: str,
        base: str,
        target: str,
        headers: list[tuple[str, str]],
        body: bytes = b"",
        answer_within: float | None = None,
        keep: int | None = None,
        tls: ClientTls | None = None,
    ) -> tuple[int, Headers, bytes]:
        """The proxy fast path (the edge to a product upstream): ``method`` to ``base`` (scheme and
        authority, perhaps a path prefix) + ``target`` (path and query, already checked to be visible
        ASCII), without the httpx layers: one formatted head, h11 parsing the answer. ``HEAD`` is not
        taken (h11 must know a response to it has no body). A header value holding CR or LF is refused
        (httpx.LocalProtocolError). Returns (status, response headers as received, the body de-chunked,
        at most ``max_body`` bytes read and the first ``keep`` of them returned, all by default); raises
        httpx errors like the transport, httpx.TimeoutException when the whole answer has not arrived
        ``answer_within`` seconds after the call (up to ``DEADLINE_SWEEP`` later)."""
        if method == "HEAD" or " " in target or "\r" in target or "\n" in target:
            raise httpx.LocalProtocolError(f"not sent by the fast path: {method} {target[:100]!r}")
        origin, prefix, host_line = _base(base) if tls is None else _base(base, tls.identity)
        fields = "".join([f"{field}: {value}\r\n" for field, value in headers])
        n = len(headers)
        if fields.count("\n") != n or fields.count("\r") != n:  # one CRLF per field, none inside
            bad = next(
                field for field, value in headers if "\r" in f"{field}{value}" or "\n" in f"{field}{value}"
            )
            raise httpx.LocalProtocolError(f"the {bad[:100]!r} header holds CR or LF")
        length = f"Content-Length: {len(body)}\r\n" if body or method in ("POST", "PUT", "PATCH") else ""
        payload = f"{method} {prefix}{target}{host_line}{length}{fields}\r\n".encode() + body
        deadline = None if answer_within is None else time.monotonic() + answer_within
        keep = self.max_body if keep is None else keep
        conn = self._take(origin)
        if conn is not None:
            try:
                return await self._exchange_plain(conn, origin, payload, deadline, keep, reused=True)
            except _Reused:
                pass  # the server had closed the idle connection: one fresh try
        if deadline is None:
            conn = await self._connect(origin, tls)
        else:
            try:
                async with asyncio.timeout(deadline - time.monotonic()):
                    conn = await self._connect(origin, tls)
            except TimeoutError:
                raise httpx.ConnectTimeout(f"could not connect to {origin[1]}:{origin[2]} in time") from None
        return await self._exchange_plain(conn, origin, payload, deadline, keep, reused=False)

    def _sweep(self) -> None:
        self._sweeper = None
        now = time.monotonic()
        for conn, deadline in self._deadlines.items():
            if deadline <= now:
                conn.expire()
        if self._deadlines:
            self._sweeper = asyncio.get_running_loop().call_later(DEADLINE_SWEEP, self._sweep)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        scheme = url.scheme
        if scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(f"unsupported scheme {scheme!r}")
        origin: Origin = (scheme, url.host, url.port or (443 if scheme == "https" else 80), "")
        body = await request.aread()
        try:
            event = h11.Request(method=request.method, target=url.raw_path, headers=request.headers.raw)
        except h11.LocalProtocolError as exc:
            raise httpx.LocalProtocolError(str(exc)) from None
        status, headers, content = await self._send(origin, event, body)
        # The body is handed over as received (de-chunked, never decompressed).
        kept = [(k, v) for k, v in headers if k.lower() not in (b"transfer-encoding", b"content-encoding")]
        return httpx.Response(status, headers=kept, content=content, request=request)

    async def _send(self, origin: Origin, event: h11.Request, payload: bytes) -> tuple[int, Headers, bytes]:
        """h11 formats ``event`` with ``payload`` as its body."""
        conn = self._take(origin)
        if conn is not None:
            try:
                return await self._exchange(conn, origin, event, payload, reused=True)
            except _Reused:
                pass  # the server had closed the idle connection: one fresh try
        conn = await self._connect(origin)
        return await self._exchange(conn, origin, event, payload, reused=False)

    def _take(self, origin: Origin) -> _Conn | None:
        pool = self._idle.get(origin)
        now = time.monotonic()
        while pool:
            conn = pool.pop()
            if now - conn.idle_since < self.keepalive_expiry and conn.reusable():
                return conn
            conn.close()
        return None

    def _give_back(self, origin: Origin, conn: _Conn) -> None:
        pool = self._idle[origin]
        if len(pool) >= self.max_idle:
            conn.close()
            return
        conn.idle_since = time.monotonic()
        pool.append(conn)

    async def _connect(self, origin: Origin, tls: ClientTls | None = None) -> _Conn:
        scheme, host, port, _identity = origin
        try:
            addresses = await self.addresses(host, port)
        except OSError as exc:
            raise httpx.ConnectError(f"could not resolve {host}: {exc}") from None
        loop = asyncio.get_running_loop()
        context = None if scheme != "https" else self.ssl_context if tls is None else tls.context
        last: Exception | None = None
        for addr in addresses:
            try:
                if self.proxy is not None:
                    conn = await _tunnel(self.proxy, addr, port, host, context)
                elif context is not None:
                    _t, conn = await loop.create_connection(
                        _Conn, addr, port, ssl=context, server_hostname=host
                    )
                else:
                    _t, conn = await loop.create_connection(_Conn, addr, port)
            except ssl.SSLError as exc:
                raise httpx.ConnectError(f"TLS handshake with {host} failed: {exc}") from None
            except OSError as exc:
                last = exc
                continue
            self.connections_opened += 1
            return conn
        if self.proxy is not None:
            proxy = f"{self.proxy[0]}:{self.proxy[1]}"
            raise httpx.ConnectError(f"could not connect to the egress proxy {proxy}: {last}")
        raise httpx.ConnectError(f"could not connect to {host}:{port}: {last}")

    async def _exchange(
        self,
        conn: _Conn,
        origin: Origin,
        event: h11.Request,
        payload: bytes,
        *,
        reused: bool,
    ) -> tuple[int, Headers, bytes]:
        h = conn.h11
        reuse = False
        try:
            parts = [h.send(event), h.send(h11.Data(data=payload)) if payload else b"", h.send(_END)]
            payload = b"".join(p for p in parts if p)
            conn.received = 0
            assert conn.transport is not None
            conn.transport.write(payload)
            if not conn.lost:
                await conn.wait()  # nothing can be buffered yet (``reusable``): skip h11's first NEED_DATA
            status, headers, body, reuse = await self._receive(conn, self.max_body)
            return status, headers, body
        except (h11.RemoteProtocolError, ConnectionError) as exc:
            raise _answer_error(exc, conn, reused=reused) from None
        finally:
            if reuse:
                self._give_back(origin, conn)
            else:
                conn.close()

    async def _exchange_plain(
        self, conn: _Conn, origin: Origin, payload: bytes, deadline: float | None, keep: int, *, reused: bool
    ) -> tuple[int, Headers, bytes]:
        """``request``'s exchange: a plain answer (``svckit.responsehead``) is read without h11; any
        other goes to h11 from its first byte (``_Conn.to_h11``). Framing, reuse and errors as h11's."""
        buf = conn.raw = bytearray()
        reuse = False
        if deadline is not None:
            self._deadlines[conn] = deadline
            if self._sweeper is None:
                self._sweeper = asyncio.get_running_loop().call_later(DEADLINE_SWEEP, self._sweep)
        try:
            conn.received = 0
            assert conn.transport is not None
            conn.transport.write(payload)
            end = buf.find(b"\r\n\r\n")
            while end < 0 and len(buf) <= MAX_HEAD and not (conn.eof or conn.lost):
                await conn.wait()
                end = buf.find(b"\r\n\r\n")
            if end > MAX_HEAD or (end < 0 and len(buf) > MAX_HEAD):
                raise h11.RemoteProtocolError(f"a response head longer than {MAX_HEAD} bytes", 0)
            plain = plain_head(bytes(buf[: end + 2])) if end >= 0 else None
            if plain is None:
                conn.to_h11()
                status, headers, body, reuse = await self._receive(conn, keep)
                return status, headers, body
            status, headers, length, close = plain
            start = end + 4
            if length > self.max_body:
                if self.refuse_longer:
                    raise httpx.ReadError(f"the response body is larger than {self.max_body} bytes")
                length, close = self.max_body, True  # cut off there; the connection is closed below
            want = start + length
            while len(buf) < want:
                if conn.eof or conn.lost:
                    raise h11.RemoteProtocolError("connection closed before the whole response", 0)
                await conn.wait()
            reuse = not close and len(buf) == want  # nothing follows that no request asked for
            return status, headers, bytes(buf[start : min(want, start + keep)])
        except TimeoutError:
            raise httpx.ReadTimeout("no whole answer in time") from None
        except (h11.RemoteProtocolError, ConnectionError) as exc:
            raise _answer_error(exc, conn, reused=reused) from None
        finally:
            conn.raw = None
            if deadline is not None:
                del self._deadlines[conn]
            if reuse:
                self._give_back(origin, conn)
            else:
                conn.close()

    async def _receive(self, conn: _Conn, keep: int) -> tuple[int, Headers, bytes, bool]:
        """h11 reads the answer: (status, headers, the first ``keep`` bytes of the body, reusable)."""
        h = conn.h11
        reuse = False
        response: h11.Response | None = None
        body: bytes | bytearray = b""
        length = 0
        while True:
            ev = h.next_event()
            kind = type(ev)
            if kind is h11.Data:
                data = cast(h11.Data, ev).data
                if length < keep:
                    body = data if not length else bytes(body) + data[: keep - length]
                length += len(data)
                if length > self.max_body:
                    if self.refuse_longer:
                        raise httpx.ReadError(f"the response body is larger than {self.max_body} bytes")
                    break  # cut off here; the connection is closed below
            elif ev is h11.NEED_DATA:
                if conn.lost:  # h11 has seen the end of the stream; never wait for more
                    raise h11.RemoteProtocolError("connection closed before a response", 0)
                await conn.wait()
            elif kind is h11.Response:
                response = cast(h11.Response, ev)
            elif kind is h11.EndOfMessage:
                reuse = h.our_state is h11.DONE and h.their_state is h11.DONE
                break
            elif kind is h11.ConnectionClosed:
                raise h11.RemoteProtocolError("connection closed before a response", 0)
            # else h11.InformationalResponse (1xx): the final response follows.
        assert response is not None
        if reuse and not h.trailing_data[0]:
            h.start_next_cycle()
        else:
            reuse = False  # closed by the server, cut off, or bytes no request asked for
        return (
            response.status_code,
            response.headers.raw_items(),
            bytes(body if len(body) <= keep else body[:keep]),
            reuse,
        )

    async def aclose(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        for pool in self._idle.values():
            for conn in pool:
                conn.close()
        self._idle.clear()
