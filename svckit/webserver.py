"""Serving a Sanic app on one or more listeners in one process, without Sanic's multi-process manager:
``create_server`` on pre-bound sockets, lifecycle events fired once. The edge (live and sandbox
listeners) and the portal serve this way.

The connection protocol is Sanic's own (``ServerProtocol``, or ``ServerWebSocketProtocol`` for an app
with WebSocket routes), minus one artefact of serving through ``create_server``: the empty ``alt-svc``
header Sanic adds to every response when not started by ``app.run``. ``start`` records its listeners as
``app.run`` does (``app.state.server_info``), so Sanic's start-up rewrite of its response code (its
"touchup") drops that header as it does under ``app.run``, at no cost per response. A server that needs
more (the edge's request deadlines and head rules) passes its own subclass as ``protocol``.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sanic import Sanic
from sanic.exceptions import BadRequest, PayloadTooLarge
from sanic.http.constants import HTTP

from svckit import frameworks
from svckit.connguard import ConnectionGuard, plain_answer, refuse
from svckit.connlimits import ConnectionLimits, Limit, refusal
from svckit.frameworks import ApplicationServerInfo, AsyncioServer, Http, HttpProtocol, WebSocketProtocol
from svckit.requesttarget import bad_target, escape_target, head_too_large


class ServerHttp(Http):
    """Sanic's HTTP/1.1 cycle, answering a head it cannot read as the request it is (svckit.requesttarget):
    a request line over the head's limit 414 (Sanic: 413), a target with a byte that must be
    percent-encoded 400 (Sanic: the stand-in request of its error answer failed on the same target, and
    the connection dropped with a traceback)."""

    async def http1_request_header(self) -> None:
        try:
            await super().http1_request_header()  # type: ignore[no-untyped-call]  # unannotated in Sanic
        except PayloadTooLarge:  # Sanic's name for a head over REQUEST_MAX_HEADER_SIZE
            raise head_too_large(self.recv_buffer, self.HEADER_MAX_SIZE) from None
        except BadRequest:
            refusal = bad_target(self.url) if self.url is not None else None
            if refusal is not None:
                raise refusal from None
            raise

    def create_empty_request(self) -> None:
        # The stand-in request of an error answer parses self.url: a target Sanic's URL parser refused
        # would fail again there, and the error would go unanswered.
        if self.url is not None:
            self.url = escape_target(self.url)
        super().create_empty_request()


class ServerProtocol(HttpProtocol):
    """Sanic's HTTP/1.1 protocol (without the empty ``alt-svc`` response header: see ``start``), with
    the connection limits of svckit.connlimits: a new connection is admitted by the app's
    ``ConnectionGuard`` (``start`` sets it) or refused: handed to svckit.connguard.refuse, which writes
    ``refusal_answer`` after its hold and closes it, Sanic never reading it.

    Sanic's protocol classes use ``__slots__`` (its metaclass gives every subclass an empty one): a
    subclass that keeps state declares its slots on one class only, as two bases with slots of their
    own cannot be combined. The guard's state of a connection lives on Sanic's ``conn_info.ctx``."""

    HTTP_CLASS: type[Http] = ServerHttp

    def connection_made(self, transport: Any) -> None:
        guard: ConnectionGuard | None = getattr(self.app.ctx, "connection_guard", None)
        if guard is None:
            super().connection_made(transport)  # type: ignore[no-untyped-call]  # unannotated in Sanic
            return
        peer = transport.get_extra_info("peername")
        address = peer[0] if isinstance(peer, tuple) else ""
        verdict = guard.admit(address, self)
        if isinstance(verdict, Limit):
            refuse(transport, self.refusal_answer(verdict), guard, address)
            return
        super().connection_made(transport)  # type: ignore[no-untyped-call]
        if self.conn_info is not None:
            self.conn_info.ctx.guarded = verdict
        else:  # Sanic failed to set it up (and logged why): nothing will release the count but this
            verdict.release()

    def connection_lost(self, exc: Exception | None) -> None:
        conn = self.conn_info
        if conn is not None:
            guarded = getattr(conn.ctx, "guarded", None)
            if guarded is not None:
                guarded.release()
                conn.ctx.guarded = None
        super().connection_lost(exc)  # type: ignore[no-untyped-call]

    def refusal_answer(self, limit: Limit) -> bytes:
        """The whole answer of a connection refused by ``limit`` (plain text; the edge answers JSON)."""
        status, message = refusal(limit)
        return plain_answer(status, message)


class ServerWebSocketProtocol(WebSocketProtocol, ServerProtocol):
    """Sanic's WebSocket protocol (WebSocket handshake answers go through ``HttpProtocol.send`` too,
    hence ``ServerProtocol`` as a base after it)."""


# Connections a listener queues before the server accepts them.
BACKLOG = 2048


def bind(listen: str, reuse_port: bool = False) -> socket.socket:
    """A non-blocking socket bound to ``HOST:PORT`` (``[v6]:PORT``; empty host: 127.0.0.1, port 0 picks
    one), not yet listening: until ``start`` has run the app's start-up and serves, a connection is
    refused (a balancer tries another process) rather than queued behind a start-up that may fail.
    ``reuse_port``: SO_REUSEPORT, so several processes' sockets share the port (the kernel spreads new
    connections over those listening)."""
    host, _, port = listen.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, int(port)))
    sock.setblocking(False)
    return sock


@dataclass
class Running:
    app: Sanic[Any, Any]
    servers: list[AsyncioServer]
    ports: list[int]

    # (Sanic leaves AsyncioServer's lifecycle methods unannotated: hence the no-untyped-call ignores.)
    async def stop(self, grace: float = 5.0) -> None:
        first = self.servers[0]
        await first.before_stop()  # type: ignore[no-untyped-call]
        for server in self.servers:
            server.close()  # type: ignore[no-untyped-call]
        for server in self.servers:
            await server.wait_closed()  # type: ignore[no-untyped-call]
        # Let handlers in flight finish (bounded), then fire after_server_stop.
        for server in self.servers:
            for conn in list(server.connections):
                conn.close_if_idle()
        deadline = asyncio.get_running_loop().time() + grace
        # Connections have no "all closed" event to wait on.
        while any(s.connections for s in self.servers) and asyncio.get_running_loop().time() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        for server in self.servers:
            for conn in list(server.connections):
                conn.abort()
        await first.after_stop()  # type: ignore[no-untyped-call]


async def start(
    app: Sanic[Any, Any],
    listens: Sequence[str | socket.socket],
    protocol: type[HttpProtocol] | None = None,
    limits: ConnectionLimits | None = None,
) -> Running:
    """Serve ``app`` on each listen address (``HOST:PORT``) or already bound socket (``bind``), every
    connection through ``protocol`` (default ``ServerWebSocketProtocol`` if the app has WebSocket routes,
    else ``ServerProtocol``), within ``limits`` (svckit.connlimits; the defaults when None) counted
    over all its listeners. The sockets listen only once the app's ``before_server_start`` listeners
    have run: nothing is answered by an app that has not finished starting."""
    frameworks.check()
    frameworks.install()
    app.ctx.connection_guard = ConnectionGuard(limits if limits is not None else ConnectionLimits())
    if protocol is None:
        protocol = ServerWebSocketProtocol if app.websocket_enabled else ServerProtocol
    socks = [bind(listen) if isinstance(listen, str) else listen for listen in listens]
    servers: list[AsyncioServer] = []
    for sock in socks:
        server = await app.create_server(
            sock=sock,
            protocol=protocol,
            access_log=False,
            backlog=BACKLOG,
            asyncio_server_kwargs={"start_serving": False},
        )
        assert server is not None
        servers.append(server)
    # What app.run records of its listeners: Sanic's start-up then removes the alt-svc header from its
    # response code (one HTTP/1.1 version among the listeners: no HTTP/3 to advertise).
    for sock in socks:
        settings = {"version": HTTP.VERSION_1, "port": sock.getsockname()[1], "sock": sock}
        app.state.server_info.append(ApplicationServerInfo(settings=settings))
    first = servers[0]
    await first.startup()  # type: ignore[no-untyped-call]
    await first.before_start()  # type: ignore[no-untyped-call]
    for server in servers:
        await server.start_serving()  # type: ignore[no-untyped-call]
    await first.after_start()  # type: ignore[no-untyped-call]
    return Running(app, servers, [s.getsockname()[1] for s in socks])
