"""Test and benchmark helpers: a small HTTPS webhook receiver on loopback (asyncio, HTTP/1.1 keep-alive)
that records every request's raw body and headers. Not used by the service itself."""

from __future__ import annotations

import asyncio
import pathlib
import socket
import ssl
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float = field(default_factory=time.time)


# The status to answer with, or the status and extra response headers (e.g. Retry-After).
Responder = Callable[[Received], int | tuple[int, dict[str, str]]]


class _Protocol(asyncio.Protocol):
    def __init__(self, receiver: Receiver) -> None:
        self.receiver = receiver
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.receiver.connections += 1

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.buf[:end]).decode("latin-1").split("\r\n")
            method, path, _version = head[0].split(" ", 2)
            headers: dict[str, str] = {}
            for line in head[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            length = int(headers.get("content-length", "0"))
            if len(self.buf) < end + 4 + length:
                return
            body = bytes(self.buf[end + 4 : end + 4 + length])
            del self.buf[: end + 4 + length]
            self.receiver._handle(self, Received(method, path, headers, body))

    def respond(self, status: int, body: bytes, extra: dict[str, str] | None = None) -> None:
        assert self.transport is not None
        self.receiver.answered += 1
        more = "".join(f"{k}: {v}\r\n" for k, v in (extra or {}).items())
        head = f"HTTP/1.1 {status} X\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n{more}\r\n"
        self.transport.write(head.encode() + body)


class _ServerThread:
    """An asyncio server on an event loop of its own, in a thread of its own: what Receiver and Hostile
    both run on."""

    def __init__(
        self, name: str, loop_factory: Callable[[], asyncio.AbstractEventLoop] = asyncio.new_event_loop
    ) -> None:
        self.name, self.loop_factory = name, loop_factory
        self.loop: asyncio.AbstractEventLoop | None = None
        self.server: asyncio.Server | None = None
        self.thread: threading.Thread | None = None

    def start(self, serve: Callable[[asyncio.AbstractEventLoop], Awaitable[asyncio.Server]]) -> int:
        """Start the thread, create the server with ``serve`` on its loop and keep the loop running: the
        server's port."""
        ready = threading.Event()

        def run() -> None:
            loop = self.loop_factory()
            self.loop = loop

            async def begin() -> None:
                self.server = await serve(loop)
                ready.set()

            loop.run_until_complete(begin())
            loop.run_forever()
            loop.close()

        self.thread = threading.Thread(target=run, name=self.name, daemon=True)
        self.thread.start()
        if not ready.wait(10) or self.server is None:
            raise RuntimeError(f"{self.name} did not start")
        return int(self.server.sockets[0].getsockname()[1])

    def stop(self, cancel_tasks: bool = False) -> None:
        """Close the server and stop the loop (first cancelling its other tasks, with ``cancel_tasks``)."""
        loop, server = self.loop, self.server
        if loop is None or server is None:
            return

        async def close() -> None:
            server.close()
            if cancel_tasks:
                tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
            loop.stop()

        asyncio.run_coroutine_threadsafe(close(), loop)
        if self.thread is not None:
            self.thread.join(10)


class Receiver:
    """HTTPS (or plain HTTP with ``ssl_context=None``) receiver in a thread of its own.

    ``responder`` picks the status per request (default 200); ``delay`` holds each response back.
    """

    def __init__(
        self,
        ssl_context: ssl.SSLContext | None,
        host: str = "127.0.0.1",
        port: int = 0,
        responder: Responder | None = None,
        record: bool = True,
        loop_factory: Callable[[], asyncio.AbstractEventLoop] = asyncio.new_event_loop,
    ) -> None:
        self.ssl_context = ssl_context
        self.host = host
        self.port = port
        self.responder: Responder = responder or (lambda _r: 200)
        self.delay = 0.0
        self.body: bytes | None = None  # every answer's body when set (else "ok", or a refusal's text)
        self.record = record
        self.requests: list[Received] = []
        self.count = 0
        self.answered = 0
        self.connections = 0
        self._lock = threading.Lock()
        self._serving = _ServerThread("webhook-receiver", loop_factory)

    def _handle(self, proto: _Protocol, request: Received) -> None:
        answer = self.responder(request)
        status, extra = answer if isinstance(answer, tuple) else (answer, None)
        with self._lock:
            self.count += 1
            if self.record:
                self.requests.append(request)
        body = self.body if self.body is not None else b"ok" if 200 <= status < 300 else b"receiver says no"
        loop = self._serving.loop
        if self.delay and loop is not None:
            loop.call_later(self.delay, proto.respond, status, body, extra)
        else:
            proto.respond(status, body, extra)

    def start(self) -> Receiver:
        def serve(loop: asyncio.AbstractEventLoop) -> Awaitable[asyncio.Server]:
            return loop.create_server(
                lambda: _Protocol(self), self.host, self.port, ssl=self.ssl_context, backlog=1024
            )

        self.port = self._serving.start(serve)
        return self

    def stop(self) -> None:
        self._serving.stop()

    def url(self, path: str = "/hook", host: str | None = None) -> str:
        scheme = "https" if self.ssl_context is not None else "http"
        return f"{scheme}://{host or self.host}:{self.port}{path}"

    def received(self) -> list[Received]:
        with self._lock:
            return list(self.requests)

    async def wait_for(self, count: int, within: float = 15.0) -> list[Received]:
        """Poll until at least ``count`` requests arrived (or raise TimeoutError)."""
        deadline = time.monotonic() + within
        while True:
            with self._lock:
                if self.count >= count:
                    return list(self.requests)
            if time.monotonic() > deadline:
                raise TimeoutError(f"receiver got {self.count} requests, expected {count}")
            await asyncio.sleep(0.02)


class Silent:
    """A TCP socket on loopback that takes connections (the kernel completes the handshake) and never
    answers: no TLS handshake, no HTTP response. ``accepted`` counts the connections it took."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self._sock = socket.create_server((host, 0), backlog=128)
        self.host = host
        self.port = self._sock.getsockname()[1]
        self._held: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="silent-receiver", daemon=True)
        self._sock.settimeout(0.05)
        self._thread.start()

    @property
    def accepted(self) -> int:
        return len(self._held)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _addr = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._held.append(conn)  # held open, never read, never written

    def url(self, path: str = "/hook") -> str:
        return f"https://{self.host}:{self.port}{path}"

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for conn in self._held:
            conn.close()
        self._sock.close()


# What a dripping receiver answers, one byte at a time: complete, so only a timeout can cut it short.
DRIP_ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"
_ENDLESS_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n"
_ENDLESS_CHUNK = b"%x\r\n%s\r\n" % (65536, b"x" * 65536)


class Hostile:
    """A receiver that answers badly, in a thread of its own (HTTPS, or plain HTTP with ``ssl_context``
    None), for every path: ``mode`` "drip" sends a valid 200 one byte every ``every`` seconds (about 70 of
    them), "endless" answers 200 at once with a chunked body that never ends, "hang" reads the request
    and never answers. ``requests`` counts request heads, ``open`` the connections open now, ``sent`` the
    bytes written (all connections)."""

    def __init__(
        self,
        mode: str,
        ssl_context: ssl.SSLContext | None = None,
        every: float = 1.0,
        host: str = "127.0.0.1",
    ) -> None:
        if mode not in ("drip", "endless", "hang"):
            raise ValueError(f"unknown mode {mode!r}")
        self.mode, self.ssl_context, self.every, self.host = mode, ssl_context, every, host
        self.port = 0
        self.requests = 0
        self.open = 0
        self.sent = 0
        self._serving = _ServerThread(f"hostile-{mode}")

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.open += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                await reader.readexactly(length)
                self.requests += 1
                if self.mode == "hang":
                    await reader.read()  # until the client gives up
                    return
                if self.mode == "endless":
                    writer.write(_ENDLESS_HEAD)
                    while not reader.at_eof():
                        writer.write(_ENDLESS_CHUNK)
                        await writer.drain()
                        self.sent += len(_ENDLESS_CHUNK)
                    return
                for i in range(len(DRIP_ANSWER)):
                    if reader.at_eof():
                        return
                    writer.write(DRIP_ANSWER[i : i + 1])
                    await writer.drain()
                    self.sent += 1
                    await asyncio.sleep(self.every)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ssl.SSLError):
            pass
        except asyncio.CancelledError:
            pass  # stopped: ends quietly (asyncio's stream server reports a handler that ends cancelled)
        finally:
            self.open -= 1
            writer.close()

    def start(self) -> Hostile:
        def serve(_loop: asyncio.AbstractEventLoop) -> Awaitable[asyncio.Server]:
            return asyncio.start_server(
                self._handle, self.host, self.port, ssl=self.ssl_context, backlog=1024
            )

        self.port = self._serving.start(serve)
        return self

    def stop(self) -> None:
        self._serving.stop(cancel_tasks=True)  # the drips and endless bodies still running

    def url(self, path: str = "/hook") -> str:
        scheme = "https" if self.ssl_context is not None else "http"
        return f"{scheme}://{self.host}:{self.port}{path}"


def trusted_receiver(directory: pathlib.Path) -> tuple[Receiver, pathlib.Path]:
    """A started HTTPS Receiver whose certificate (localhost, 127.0.0.1) comes from a new trustme CA, and
    that CA's PEM file under ``directory`` (webhookd's ``--ca-bundle``)."""
    import trustme

    ca = trustme.CA()
    ca_file = directory / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost", "127.0.0.1").configure_cert(server_ctx)
    return Receiver(server_ctx).start(), ca_file


@dataclass
class ConnectProxy:
    """A tiny HTTP CONNECT proxy (webhookd's ``--egress-proxy`` in tests): the targets of its tunnels, in
    order. Serve it with ``asyncio.start_server(proxy.handle, ...)``."""

    targets: list[str] = field(default_factory=list)
    port: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        method, target, _ = head.split(b"\r\n", 1)[0].decode().split(" ", 2)
        if method != "CONNECT":
            writer.write(b"HTTP/1.1 405 X\r\nContent-Length: 0\r\n\r\n")
            writer.close()
            return
        host, _, port = target.rpartition(":")
        self.targets.append(target)
        up_reader, up_writer = await asyncio.open_connection(host.strip("[]"), int(port))
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except ConnectionError:
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
