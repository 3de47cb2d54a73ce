"""What a /v1/stream client sends, fed to the WebSocket parser in bounded slices (issue 20: ping floods).

Sanic's ``WebsocketImplProtocol.data_received`` gives the sans-IO parser of ``websockets`` all that one
read returned (tens to hundreds of KiB): it parses, and answers with a pong, every frame in it before
anything of ours sees one, so a read full of 10-byte ping frames held the event loop for tens of ms, and
after the stream closed the client with 1008 its linger went on parsing what the client still sent. Here
instead
(``FrameIntake``, one per WebSocket connection, owned by ``edge.server.EdgeProtocol``):

- the bytes of a read are parsed ``SLICE_BYTES`` at a time, and the frames of each slice go to the
  stream's admission (its message bucket) before the next slice is parsed: parsing stops at the first
  frame refused, so a flood costs its bucket's burst and one slice of frames, however much it sent;
- at most ``TURN_BYTES`` are parsed per event-loop turn; the rest waits for the next turn, the socket not
  read meanwhile;
- nothing is parsed before the stream's session is there to admit it;
- once the stream closes a client for its fault (1007, 1008; a frame the parser refused: 1002, 1007, 1009),
  the close frame is written at once and no byte more is parsed: what arrives is counted and dropped
  until the client goes quiet, sends EOF, ``LINGER_SECONDS`` pass (``linger_wait``), or more than
  ``LINGER_BYTES`` arrive (then the connection is aborted). Closing with unread data would send a reset,
  which can make the client's kernel drop our close frame unread; lingering only until the client is
  quiet frees the connection as soon as it has stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any, Protocol

from svckit.frameworks import Frame, Opcode, State, WebsocketImplProtocol

# Bytes parsed before the frames they held are admitted: at most this / 6 frames (a masked empty frame is
# 6 bytes) are parsed past a refusal.
SLICE_BYTES = 512
# Bytes parsed per connection per event-loop turn (one largest message, edge.config's default, a turn).
TURN_BYTES = 16 * 1024
# After a close for the client's fault: the connection is closed once nothing has arrived for this long...
QUIET_SECONDS = 0.1
# ... or this long after the close at most, or at once past this many bytes (edge.server's HTTP linger
# after a refused request uses the same two).
LINGER_SECONDS = 2.0
LINGER_BYTES = 16 * 1024 * 1024
# A close frame's payload holds 125 bytes: the code's 2 and at most this many of UTF-8 for the reason.
CLOSE_REASON_BYTES = 123


def close_reason(reason: str) -> str:
    """``reason`` as a close frame can hold it: at most CLOSE_REASON_BYTES of UTF-8, never a split
    character (a longer reason makes the close raise, and no close frame is sent)."""
    return reason.encode()[:CLOSE_REASON_BYTES].decode(errors="ignore")


def linger_wait(elapsed: float, quiet_for: float, ended: bool) -> float | None:
    """How much longer a connection closed for its fault keeps reading (and dropping) what the client
    sends, ``elapsed`` seconds after the close, nothing having arrived for ``quiet_for`` seconds; ``ended``:
    the client sent EOF or the connection is gone. None: stop now (nothing left to wait for, the client is
    quiet, or the linger's time is up); else seconds until it is asked again. Quiet is enough: a client
    that has stopped sending has nothing left to reset our close frame with."""
    if ended or quiet_for >= QUIET_SECONDS or elapsed >= LINGER_SECONDS:
        return None
    return min(QUIET_SECONDS - quiet_for, LINGER_SECONDS - elapsed)


class IntakeOwner(Protocol):
    """The stream session an intake parses for."""

    def admit(self, frames: Sequence[Frame], now: float) -> int:
        """Take ``frames`` (all parsed from one slice) through the stream's limits: how many of them pass
        (fewer than all: the owner has closed the stream with ``FrameIntake.fault``)."""

    def parser_failed(self, code: int, reason: str) -> None:
        """The parser refused a frame and has closed the connection with ``code``."""


class FrameIntake:
    """One WebSocket connection's inbound bytes: see the module's docstring."""

    __slots__ = (
        "_backlog",
        "_ended",
        "_eof_pending",
        "_paused",
        "_scheduled",
        "_tasks",
        "_wake",
        "discarded",
        "discarding",
        "frames",
        "last_data",
        "loop",
        "owner",
        "released",
        "transport",
        "ws",
    )

    def __init__(self, ws: WebsocketImplProtocol, transport: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.ws = ws
        self.transport = transport
        self.loop = loop
        self.owner: IntakeOwner | None = None
        self.released = False  # the session is over: parse without admission until Sanic closes
        self.frames = 0  # parsed
        self.discarding = False
        self.discarded = 0  # bytes dropped unparsed
        self.last_data = 0.0
        self._backlog = b""
        self._scheduled: asyncio.Handle | None = None
        self._tasks: set[asyncio.Future[None]] = set()
        self._paused = False
        self._ended = False
        self._eof_pending = False
        self._wake: asyncio.Event | None = None

    # -- who admits ------------------------------------------------------------------------------
    def serve(self, owner: IntakeOwner) -> None:
        self.owner = owner
        self._schedule()

    def release(self) -> None:
        """The session is over: nothing of it stays reachable from the connection."""
        self.owner = None
        self.released = True
        self._schedule()

    # -- bytes in --------------------------------------------------------------------------------
    def data_received(self, data: bytes) -> None:
        if self.discarding:
            self._drop(len(data))
            return
        self._backlog = self._backlog + data if self._backlog else data
        if self._scheduled is None:
            self._feed()

    def eof_received(self) -> bool | None:
        """The client's EOF, answered as ``asyncio.Protocol.eof_received`` (True: keep the transport open).
        A connection closed for its fault: the linger ends, and so does the connection. Bytes still waiting
        to be parsed (a last message and its close, say): the parser gets the EOF after them."""
        if self.discarding:
            self.ended()
            return False
        if self._backlog:
            self._eof_pending = True
            return True
        return self.ws.eof_received()

    def ended(self) -> None:
        self._ended = True
        if self._wake is not None:
            self._wake.set()

    def _drop(self, size: int) -> None:
        self.discarded += size
        self.last_data = self.loop.time()
        if self.discarded > LINGER_BYTES:
            self.transport.abort()

    def _schedule(self) -> None:
        if self._backlog and self._scheduled is None:
            self._scheduled = self.loop.call_soon(self._feed)

    def _feed(self) -> None:
        self._scheduled = None
        data, self._backlog = self._backlog, b""
        if not data or self.discarding:
            return
        if self.owner is None and not self.released:
            self._hold(data)  # the session has not started: it admits the first frame
            return
        view = memoryview(data)
        end = min(len(data), TURN_BYTES)
        pos = 0
        while pos < end and not self.discarding:
            piece = bytes(view[pos : pos + SLICE_BYTES])
            pos += len(piece)
            self._parse(piece)
        if self.discarding:
            self._drop(len(data) - pos)
        elif pos < len(data):
            self._hold(data[pos:])
            self._scheduled = self.loop.call_soon(self._feed)
        elif self._eof_pending:
            self._eof_pending = False
            self.ws.eof_received()  # Sanic's: closes the connection once the frames before are handled
        elif self._paused:
            self._paused = False
            if self.ws.pause_frame_fut is None:  # Sanic's own pause (a message not yet taken) stands
                self.transport.resume_reading()

    def _hold(self, rest: bytes) -> None:
        self._backlog = rest
        self._paused = True
        self.transport.pause_reading()  # again: Sanic's assembler may have resumed it meanwhile

    def _parse(self, piece: bytes) -> None:
        ws = self.ws
        proto = ws.ws_proto
        proto.receive_data(piece)
        out = proto.data_to_send()
        events: list[Frame] = proto.events_received()  # type: ignore[assignment]  # past the handshake: frames
        self.frames += len(events)
        owner = self.owner
        if proto.parser_exc is not None:
            # The parser refused a frame (1002, 1007, 1009) and wrote its close: linger as for our own.
            close = proto.close_sent
            self._start_discarding()
            if owner is not None:
                owner.parser_failed(close.code if close is not None else 1002, close.reason if close else "")
            out = [chunk for chunk in out if chunk]  # the EOF marker would make Sanic close at once
            for chunk in out:
                self.transport.write(chunk)
            out = []
        elif events and owner is not None:
            admitted = owner.admit(events, self.loop.time())
            if admitted < len(events):
                # Refused: the owner has written the close. The admitted frames go on (their pongs: a
                # server's writes here are pongs only, one a ping, in order); nothing after them.
                self._start_discarding()
                events = events[:admitted]
                out = out[: sum(1 for e in events if e.opcode is Opcode.PING)]
        if out or events:
            # As Sanic's data_received: pongs out, frames to its assembler.
            task = asyncio.ensure_future(ws.async_data_received(out, events))  # type: ignore[no-untyped-call]
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    # -- closing for the client's fault ----------------------------------------------------------
    def fault(self, code: int, reason: str) -> None:
        """Close the stream for the client's fault (1007, 1008): the close frame now, whatever the socket's
        write buffer holds, and from now on nothing parsed."""
        proto = self.ws.ws_proto
        if proto.state is State.OPEN:
            proto.send_close(code, close_reason(reason))
            for chunk in proto.data_to_send():
                if chunk:
                    self.transport.write(chunk)
        self._start_discarding()

    def _start_discarding(self) -> None:
        if self.discarding:
            return
        self.discarding = True
        self.last_data = self.loop.time()
        self.ws.can_pause = False  # Sanic's assembler may not pause reading: the linger reads everything
        if self._scheduled is not None:
            self._scheduled.cancel()
            self._scheduled = None
        self._drop(len(self._backlog))
        self._backlog = b""
        self._paused = False
        self.transport.resume_reading()
        if self._eof_pending:
            self.ended()

    async def linger(self) -> None:
        """Wait until ``linger_wait`` says the connection may be closed."""
        loop = self.loop
        started = loop.time()
        self._wake = asyncio.Event()
        while True:
            now = loop.time()
            wait = linger_wait(now - started, now - self.last_data, self._ended)
            if wait is None:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)


def intake_of(ws: WebsocketImplProtocol) -> FrameIntake:
    """The intake of a WebSocket that ``edge.server.EdgeProtocol`` serves."""
    intake = getattr(ws.io_proto, "ws_intake", None)
    if not isinstance(intake, FrameIntake):
        raise RuntimeError("a /v1/stream WebSocket is served by edge.server.EdgeProtocol")
    return intake
