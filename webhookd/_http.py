"""A lean HTTP/1.1 transport for httpx: keep-alive connection pool per origin, SSRF-guarded connects.

Why not httpx's default transport: httpcore's pool rescans every connection on every request
(quadratic in pool size) and each request passes several anyio layers; on a small machine that capped
deliveries at a few hundred per second. This transport speaks the small subset of HTTP/1.1 a webhook
POST needs (Content-Length or chunked responses, keep-alive, ``Connection: close``), resolves and checks
the target itself (``_ssrf.resolve_checked``) and connects only to a checked address, with TLS SNI,
certificate verification and Host still using the URL's name.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
import time
from collections import defaultdict
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

from webhookd._errors import UnsafeTarget
from webhookd._ssrf import Policy, Resolver, resolve_checked, system_resolver

MAX_HEAD = 64 * 1024
MAX_BODY_KEPT = 1024 * 1024  # a larger response body is cut here and its connection not reused

Origin = tuple[str, str, int]


@dataclass(eq=False)
class _Conn:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    idle_since: float = 0.0

    def close(self) -> None:
        self.writer.close()


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


class _Reused(Exception):
    """A pooled connection turned out to be closed by the peer before answering."""


class FastTransport(httpx.AsyncBaseTransport):
    def __init__(
        self,
        policy: Policy,
        *,
        ca_bundle: str | None = None,
        resolver: Resolver = system_resolver,
        max_idle_per_origin: int = 256,
        keepalive_expiry: float = 30.0,
    ) -> None:
        self.policy = policy
        self.resolver = resolver
        self.ssl_context = ssl.create_default_context(cafile=ca_bundle)
        self.max_idle = max_idle_per_origin
        self.keepalive_expiry = keepalive_expiry
        self._idle: dict[Origin, list[_Conn]] = defaultdict(list)
        self.connections_opened = 0

    async def post(self, url: str, headers: dict[str, str], body: bytes) -> tuple[int, bytes]:
        """The delivery fast path: one POST without the httpx layers (same pool, same guard).

        Returns (status, body as received, de-chunked); raises httpx errors like the transport.
        """
        scheme, host, port, target = _split(url)
        name = f"[{host}]" if ":" in host else host
        head = [f"POST {target} HTTP/1.1\r\nHost: {name if port in (80, 443) else f'{name}:{port}'}\r\n"]
        head.append(f"Content-Length: {len(body)}\r\n")
        for name, value in headers.items():
            head.append(f"{name}: {value}\r\n")
        head.append("\r\n")
        status, _headers, content = await self._send((scheme, host, port), "".join(head).encode() + body)
        return status, content

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        scheme = url.scheme
        if scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(f"unsupported scheme {scheme!r}")
        origin: Origin = (scheme, url.host, url.port or (443 if scheme == "https" else 80))
        body = await request.aread()
        head = [f"{request.method} {url.raw_path.decode('ascii')} HTTP/1.1\r\n".encode()]
        for name, value in request.headers.raw:
            head.append(name + b": " + value + b"\r\n")
        head.append(b"\r\n")
        status, headers, content = await self._send(origin, b"".join(head) + body)
        return httpx.Response(status, headers=headers, content=content, request=request)

    async def _send(self, origin: Origin, payload: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        conn = self._take(origin)
        if conn is not None:
            try:
                return await self._exchange(conn, origin, payload, reused=True)
            except _Reused:
                pass  # the server had closed the idle connection: one fresh try
        conn = await self._connect(origin)
        return await self._exchange(conn, origin, payload, reused=False)

    def _take(self, origin: Origin) -> _Conn | None:
        pool = self._idle.get(origin)
        now = time.monotonic()
        while pool:
            conn = pool.pop()
            if now - conn.idle_since < self.keepalive_expiry and not conn.reader.at_eof():
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

    async def _connect(self, origin: Origin) -> _Conn:
        scheme, host, port = origin
        try:
            addresses = await resolve_checked(host, port, self.policy, self.resolver)
        except UnsafeTarget as exc:
            raise httpx.ConnectError(exc.message) from None
        last: Exception | None = None
        for addr in addresses:
            try:
                if scheme == "https":
                    reader, writer = await asyncio.open_connection(
                        addr, port, ssl=self.ssl_context, server_hostname=host, limit=MAX_HEAD
                    )
                else:
                    reader, writer = await asyncio.open_connection(addr, port, limit=MAX_HEAD)
            except ssl.SSLError as exc:
                raise httpx.ConnectError(f"TLS handshake with {host} failed: {exc}") from None
            except OSError as exc:
                last = exc
                continue
            self.connections_opened += 1
            return _Conn(reader, writer)
        raise httpx.ConnectError(f"could not connect to {host}:{port}: {last}")

    async def _exchange(
        self, conn: _Conn, origin: Origin, payload: bytes, *, reused: bool
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        keep = False
        try:
            conn.writer.write(payload)
            await conn.writer.drain()
            try:
                raw_head = await conn.reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError as exc:
                if reused and not exc.partial:
                    raise _Reused() from None
                raise httpx.RemoteProtocolError("connection closed before a response") from None
            except asyncio.LimitOverrunError:
                raise httpx.RemoteProtocolError("response head larger than 64 KiB") from None
            lines = raw_head[:-4].decode("latin-1").split("\r\n")
            parts = lines[0].split(" ", 2)
            if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
                raise httpx.RemoteProtocolError(f"not an HTTP/1.x status line: {lines[0][:100]!r}")
            status = int(parts[1])
            headers: list[tuple[str, str]] = []
            length: int | None = None
            chunked = False
            close = parts[0] == "HTTP/1.0"
            for line in lines[1:]:
                name, _, value = line.partition(":")
                name, value = name.strip(), value.strip()
                headers.append((name, value))
                lname = name.lower()
                if lname == "content-length" and value.isdigit():
                    length = int(value)
                elif lname == "transfer-encoding" and "chunked" in value.lower():
                    chunked = True
                elif lname == "connection":
                    close = "close" in value.lower() or (close and "keep-alive" not in value.lower())
            if status in (204, 304) or 100 <= status < 200:
                body, complete = b"", True
            elif chunked:
                body, complete = await self._read_chunked(conn.reader)
            elif length is not None:
                body = await conn.reader.readexactly(min(length, MAX_BODY_KEPT))
                complete = length <= MAX_BODY_KEPT
            else:
                body = await conn.reader.read(MAX_BODY_KEPT)
                complete, close = False, True
            keep = complete and not close
            # The body is handed over as received (de-chunked, never decompressed).
            drop = ("transfer-encoding", "content-encoding")
            headers = [(k, v) for k, v in headers if k.lower() not in drop]
            return status, headers, body
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            if reused and isinstance(exc, ConnectionError):
                raise _Reused() from None
            raise httpx.ReadError(f"connection lost: {exc}") from None
        finally:
            if keep:
                self._give_back(origin, conn)
            else:
                conn.close()

    @staticmethod
    async def _read_chunked(reader: asyncio.StreamReader) -> tuple[bytes, bool]:
        out = bytearray()
        while True:
            size_line = await reader.readuntil(b"\r\n")
            try:
                size = int(size_line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise httpx.RemoteProtocolError("bad chunk size") from None
            if size == 0:
                while (await reader.readuntil(b"\r\n")) != b"\r\n":
                    pass  # trailers
                return bytes(out), True
            if len(out) + size > MAX_BODY_KEPT:
                return bytes(out), False
            out += await reader.readexactly(size)
            await reader.readexactly(2)

    async def aclose(self) -> None:
        for pool in self._idle.values():
            for conn in pool:
                conn.close()
        self._idle.clear()
