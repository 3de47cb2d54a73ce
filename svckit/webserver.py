"""Serving a Sanic app on one or more listeners in one process, without Sanic's multi-process manager:
``create_server`` on pre-bound sockets, lifecycle events fired once. The edge (live and sandbox
listeners) and the portal serve this way.

The connection protocol is Sanic's own (``ServerProtocol``, or ``ServerWebSocketProtocol`` for an app
with WebSocket routes), minus one artefact of serving through ``create_server``: the empty ``alt-svc``
header Sanic adds to every response when not started by ``app.run``. A server that needs more (the
edge's request deadlines and head rules) passes its own subclass as ``protocol``.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sanic import Sanic
from sanic.server.async_server import AsyncioServer
from sanic.server.protocols.http_protocol import HttpProtocol
from sanic.server.protocols.websocket_protocol import WebSocketProtocol

_EMPTY_ALT_SVC = b"\r\nalt-svc: "


class ServerProtocol(HttpProtocol):
    """Sanic's HTTP/1.1 protocol, without the empty ``alt-svc`` response header.

    Sanic's protocol classes use ``__slots__`` (its metaclass gives every subclass an empty one): a
    subclass that keeps state declares its slots on one class only, as two bases with slots of their
    own cannot be combined."""

    async def send(self, data: bytes) -> None:
        if data[:5] == b"HTTP/":
            end = data.find(b"\r\n\r\n")
            i = data.find(_EMPTY_ALT_SVC, 0, end + 2)
            if i >= 0 and data[i + 11 : i + 13] == b"\r\n":
                data = data[:i] + data[i + 11 :]
        await super().send(data)  # type: ignore[no-untyped-call]  # Sanic leaves it unannotated


class ServerWebSocketProtocol(WebSocketProtocol, ServerProtocol):
    """Sanic's WebSocket protocol (WebSocket handshake answers go through ``HttpProtocol.send`` too,
    hence ``ServerProtocol`` as a base after it)."""


def bind(listen: str) -> socket.socket:
    """A listening, non-blocking socket on ``HOST:PORT`` (``[v6]:PORT``; empty host: 127.0.0.1, port 0
    picks one)."""
    host, _, port = listen.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, int(port)))
    sock.listen(2048)
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
) -> Running:
    """Serve ``app`` on each listen address (``HOST:PORT``) or already bound socket, every connection
    through ``protocol`` (default ``ServerWebSocketProtocol`` if the app has WebSocket routes, else
    ``ServerProtocol``)."""
    if protocol is None:
        protocol = ServerWebSocketProtocol if app.websocket_enabled else ServerProtocol
    socks = [bind(listen) if isinstance(listen, str) else listen for listen in listens]
    servers: list[AsyncioServer] = []
    for sock in socks:
        server = await app.create_server(sock=sock, protocol=protocol, access_log=False)
        assert server is not None
        servers.append(server)
    first = servers[0]
    await first.startup()  # type: ignore[no-untyped-call]
    await first.before_start()  # type: ignore[no-untyped-call]
    for server in servers:
        await server.start_serving()  # type: ignore[no-untyped-call]
    await first.after_start()  # type: ignore[no-untyped-call]
    return Running(app, servers, [s.getsockname()[1] for s in socks])
