"""svckit.connlimits applied to one process's connections: ``ConnectionGuard`` keeps the open counts (by
source, block, in all) and the trusted sources; ``svckit.webserver.ServerProtocol`` asks it at accept time
and tells it when a connection ends. A refused connection is handed to ``RefusedConnection``: its short
answer written, its FIN sent, what still arrives dropped, closed on the client's EOF or soon after (a
close with unread bytes would send a reset that can make the client drop the answer unread).

``accepted(request)`` is what a server calls when a request's credential was accepted (the edge's gate,
the portal's session middleware): the connection then keeps the normal keep-alive and its source is
trusted. ``refused(request, status, accepted)`` is called with each refusal: an anonymous connection is
closed after it (``close_after``). A refused connection is held unread before its answer
(``refusal_hold``); the held ones are counted by block here too.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import time
from collections.abc import Callable
from typing import Any

from prometheus_client import Counter
from sanic import Request
from sanic.http import Http

from svckit.connlimits import (
    MAX_TRUSTED,
    TRUSTED_SECONDS,
    ConnectionLimits,
    Limit,
    Open,
    admit,
    close_after,
    keep_alive,
    refusal_hold,
)
from svckit.netblocks import buckets
from svckit.refusallog import RefusalLog
from svckit.untiltable import until_table

REFUSED = Counter(
    "http_connections_refused_total",
    "New connections refused at accept time, by the limit reached (address, block, anonymous, budget)",
    ["limit"],
)
CLOSED_EARLY = Counter(
    "http_connections_closed_early_total",
    "Anonymous connections closed after a refusal of a request with no accepted credential",
)
# How long a refused connection waits for its client's EOF after the answer, and the bytes it drops.
REFUSED_LINGER = 1.0
REFUSED_DRAIN = 64 * 1024

log = logging.getLogger("svckit.connections")
REFUSAL_LOG = RefusalLog(log)


class Guarded:
    """One served connection as the guard counts it (kept on Sanic's ``conn_info.ctx.guarded``)."""

    __slots__ = ("accepted", "block", "guard", "protocol", "server_keep_alive", "source")

    def __init__(
        self, guard: ConnectionGuard, source: str, block: str | None, trusted: bool, protocol: Any
    ) -> None:
        self.guard: ConnectionGuard | None = guard
        # block: None when not counted in its block (its source was trusted when it connected).
        self.source, self.block, self.accepted, self.protocol = source, block, trusted, protocol
        self.server_keep_alive: float = protocol.keep_alive_timeout
        protocol.keep_alive_timeout = keep_alive(trusted, self.server_keep_alive, guard.limits)

    def accept(self) -> None:
        """A credential was accepted on this connection: the server's keep-alive, its source trusted."""
        self.accepted = True
        if self.protocol is not None:
            self.protocol.keep_alive_timeout = self.server_keep_alive
        if self.guard is not None:
            self.guard.trust(self.source)

    def release(self) -> None:
        guard, self.guard, self.protocol = self.guard, None, None
        if guard is not None:
            guard.release(self.source, self.block)


class ConnectionGuard:
    def __init__(
        self,
        limits: ConnectionLimits,
        clock: Callable[[], float] = time.monotonic,
        spread: Callable[[], float] = functools.partial(random.uniform, 0.5, 1.5),
    ) -> None:
        self.limits, self.clock, self.spread = limits, clock, spread
        self.by_source: dict[str, int] = {}
        self.by_block: dict[str, int] = {}  # anonymous connections only
        self.total = 0
        self.trusted = until_table(MAX_TRUSTED, clock)  # source -> until
        self.held_by_block: dict[str, int] = {}  # refused connections held, by block
        self.held_total = 0

    def admit(self, address: str, protocol: Any) -> Guarded | Limit:
        """A new connection from ``address``: counted and its ``Guarded`` returned, or the limit met."""
        source, block = buckets(address)
        trusted = self.is_trusted(source)
        now_open = Open(self.by_source.get(source, 0), self.by_block.get(block, 0), self.total)
        limit = admit(now_open, trusted, self.limits)
        if limit is not Limit.OPEN:
            REFUSED.labels(limit.value).inc()
            REFUSAL_LOG.add(f"connection limit: {limit.value}")
            return limit
        self.by_source[source] = now_open.source + 1
        if not trusted:
            self.by_block[block] = now_open.block + 1
        self.total += 1
        return Guarded(self, source, None if trusted else block, trusted, protocol)

    def release(self, source: str, block: str | None) -> None:
        self.total -= 1
        _decrement(self.by_source, source)
        if block is not None:
            # A connection admitted anonymous counts in its block until it ends, even once accepted.
            _decrement(self.by_block, block)

    def hold(self, block: str) -> float | None:
        """A refused connection from ``block``: how long it is held (a held place taken: ``unhold``
        frees it), or None."""
        held = self.held_by_block.get(block, 0) + 1
        seconds = refusal_hold(held, self.held_total)
        if seconds is None:
            return None
        self.held_by_block[block] = held
        self.held_total += 1
        # Spread over half to one and a half of it: connections refused together would otherwise be
        # answered together, and a flood's retries come back as one burst a second.
        return seconds * self.spread()

    def unhold(self, block: str) -> None:
        self.held_total -= 1
        _decrement(self.held_by_block, block)

    def is_trusted(self, source: str) -> bool:
        until = self.trusted.get(source)
        return until is not None and until > self.clock()

    def trust(self, source: str) -> None:
        self.trusted[source] = self.clock() + TRUSTED_SECONDS


def _decrement(counts: dict[str, int], key: str) -> None:
    left = counts.get(key, 1) - 1
    if left > 0:
        counts[key] = left
    else:
        counts.pop(key, None)


def _guarded(request: Request[Any, Any]) -> Guarded | None:
    conn = request.conn_info
    if conn is None:
        return None
    guarded: Guarded | None = getattr(conn.ctx, "guarded", None)
    return guarded


def accepted(request: Request[Any, Any]) -> None:
    """``request`` presented an accepted credential: its connection keeps the server's keep-alive and its
    source is trusted (svckit.connlimits)."""
    conn = request.conn_info
    if conn is not None:
        guarded = getattr(conn.ctx, "guarded", None)
        if guarded is not None and not guarded.accepted:
            guarded.accept()


def refused(request: Request[Any, Any], status: int, request_accepted: bool) -> None:
    """A refusal of ``status`` is being answered: an anonymous connection is closed after it."""
    guarded = _guarded(request)
    if guarded is None or not close_after(status, request_accepted, guarded.accepted):
        return
    stream = request.stream
    if isinstance(stream, Http) and stream.keep_alive:
        stream.keep_alive = False
        CLOSED_EARLY.inc()


class RefusedConnection(asyncio.Protocol):
    """A connection refused at accept time: held ``hold`` seconds unread (None: not at all), then
    ``answer`` written with a FIN after it, then what arrives is dropped until the client's EOF, at
    most REFUSED_DRAIN bytes and REFUSED_LINGER seconds."""

    def __init__(self, answer: bytes, guard: ConnectionGuard, block: str, hold: float | None) -> None:
        self.answer, self.guard, self.block, self.hold = answer, guard, block, hold
        self.transport: Any = None  # asyncio's or uvloop's (not an asyncio.Transport subclass)
        self.timer: asyncio.TimerHandle | None = None
        self.dropped = 0

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        if self.hold is None:
            self.respond()
            return
        transport.pause_reading()
        self.timer = asyncio.get_running_loop().call_later(self.hold, self.respond)

    def respond(self) -> None:
        self.release()
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        transport.write(self.answer)
        if not transport.can_write_eof():  # TLS: no half-close
            transport.close()
            return
        transport.write_eof()
        transport.resume_reading()
        self.timer = asyncio.get_running_loop().call_later(REFUSED_LINGER, transport.abort)

    def release(self) -> None:
        if self.hold is not None:
            self.hold = None
            self.guard.unhold(self.block)

    def data_received(self, data: bytes) -> None:
        self.dropped += len(data)
        if self.dropped > REFUSED_DRAIN and self.transport is not None:
            self.transport.abort()

    def eof_received(self) -> bool:
        return False  # the client is done: close

    def connection_lost(self, exc: Exception | None) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.release()
        self.transport = None


def refuse(transport: Any, answer: bytes, guard: ConnectionGuard, address: str) -> None:
    """Hand ``transport`` (just accepted from ``address``) to a ``RefusedConnection`` writing ``answer``
    after its hold."""
    block = buckets(address)[1]
    refused_protocol = RefusedConnection(answer, guard, block, guard.hold(block))
    transport.set_protocol(refused_protocol)
    refused_protocol.connection_made(transport)


_REASONS = {429: "Too Many Requests", 503: "Service Unavailable"}


def plain_answer(
    status: int,
    message: str,
    content_type: str = "text/plain; charset=utf-8",
    headers: tuple[tuple[str, str], ...] = (),
) -> bytes:
    """A whole HTTP/1.1 answer (429 or 503, with Retry-After: 1) that closes its connection."""
    body = message.encode()
    extra = "".join(f"{name}: {value}\r\n" for name, value in headers)
    head = (
        f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\nRetry-After: 1\r\n{extra}Connection: close\r\n\r\n"
    )
    return head.encode() + body
