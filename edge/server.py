"""The edge's connection protocol: Sanic's HTTP/1.1 and WebSocket with the edge's request-head and body
deadlines, its request-head rules, a lingering close and a tidier response head. The edge serves its app
on its two listeners through ``svckit.webserver.start(app, socks, protocol=EdgeProtocol)``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from time import monotonic as current_time
from types import MethodType
from typing import Any

from sanic import Request
from sanic.exceptions import BadRequest, PayloadTooLarge, RequestTimeout

from edge.config import EdgeConfig
from edge.docurls import DOCS_PATH
from edge.exceptions import EdgeError
from edge.requesthead import (
    check_fields,
    check_raw_names,
    check_target,
    escape_target,
    head_passes,
    head_too_large,
)
from edge.responses import EdgeResponse, error_body, response_head
from edge.wsintake import LINGER_BYTES, LINGER_SECONDS, FrameIntake
from svckit.connguard import plain_answer
from svckit.connlimits import Limit, refusal
from svckit.frameworks import Http, HttpProtocol, Stage, WebSocketProtocol
from svckit.ids import new_request_id
from svckit.webserver import ServerProtocol

_SWITCHING = b"HTTP/1.1 101 "


class _TidyResponseHead(ServerProtocol):
    """Adds X-Request-Id to the 101 answer of a WebSocket handshake, which Sanic writes itself through
    ``HttpProtocol.send`` (hence a base after WebSocketProtocol). Every other response is sent by
    ``EdgeHttp`` straight through ``HttpProtocol.send``: no extra coroutine per response."""

    async def send(self, data: bytes) -> None:
        if data[:13] == _SWITCHING:
            end = data.find(b"\r\n\r\n")
            http = getattr(self, "_http", None)
            rid = getattr(getattr(getattr(http, "request", None), "ctx", None), "rid", None)
            if rid and end > 0:
                data = bytes(data[:end]) + f"\r\nX-Request-Id: {rid}".encode() + bytes(data[end:])
        await super().send(data)  # type: ignore[no-untyped-call]  # Sanic leaves it unannotated


class EdgeHttp(Http):
    """Sanic's HTTP/1.1 cycle, plus: the request-head deadline of ``EdgeProtocol`` (started when a
    request's first byte arrives, the first request's at connect, and cleared once its head is read),
    its body deadline (started when a head announcing a body is read, cleared once the body is), and
    the rules of ``edge.requesthead`` on every head. A refusal raised here is answered as any other
    error and, being raised before the handler stage, closes the connection after the answer."""

    protocol: EdgeProtocol  # (typed here rather than cast per request: typing.cast is a call)

    def __init__(self, protocol: HttpProtocol) -> None:
        super().__init__(protocol)  # type: ignore[no-untyped-call]  # unannotated in Sanic
        # Responses skip _TidyResponseHead.send (only the WebSocket handshake needs it). Looked up per
        # connection: Sanic's start-up replaces HttpProtocol.send with its rewritten version.
        self._send = MethodType(HttpProtocol.send, protocol)

    async def http1_request_header(self) -> None:
        protocol = self.protocol
        protocol._body_deadline = None
        if protocol._head_deadline is None:
            protocol._head_deadline = current_time() + protocol.request_timeout
        try:
            await super().http1_request_header()  # type: ignore[no-untyped-call]  # unannotated in Sanic
        except PayloadTooLarge:  # Sanic's name for a head over REQUEST_MAX_HEADER_SIZE
            raise head_too_large(self.recv_buffer, self.HEADER_MAX_SIZE) from None
        except BadRequest:
            if self.url is not None:
                check_target(self.url)  # the precise reason when it is the target
            raise
        protocol._head_deadline = None
        request = self.request
        if self.request_body:
            # An app without an EdgeConfig (scripts/bench_edge.py's bare route): the default deadline.
            config = getattr(protocol.app.ctx, "config", EdgeConfig)
            protocol._body_deadline = current_time() + config.body_timeout
        target: str = self.url  # type: ignore[assignment]  # read: a head has a target
        check_target(target)  # not implied by head_passes, which allows a HTAB anywhere in the head
        head = request.head
        if not head_passes(head, request.headers, target):
            check_fields(request.headers.items(), target)
        if not head.isascii():  # names as sent (Sanic's lower-casing can make one ASCII)
            check_raw_names(head)
        if self.head_only:
            # HEAD is GET without the body (RFC 9110 §9.3.2): routed, authorised and answered as GET,
            # and Sanic's head_only sends the head (with the Content-Length) and drops the body.
            request.method = "GET"

    async def read(self) -> bytes | None:
        data = await super().read()
        if not self.request_body:
            self.protocol._body_deadline = None
        return data

    def create_empty_request(self) -> None:
        # The stand-in request for an error before the head was accepted parses self.url: a target
        # Sanic's URL parser refused would fail again there, and the error would go unanswered.
        if self.url is not None:
            self.url = escape_target(self.url)
        super().create_empty_request()

    async def http1_response_header(self, data: bytes, end_stream: bool) -> None:
        """A whole EdgeResponse's head as Sanic writes it, built in one pass (edge.responses.response_head),
        when Sanic would do nothing more than write it: no HEAD request, no 100-continue, no access log.
        Anything else goes Sanic's way."""
        res = self.response
        if (
            end_stream
            and res.__class__ is EdgeResponse
            and not self.head_only
            and not self.expecting_continue
            and not self.protocol.access_log
        ):
            if not data and res.body:
                data = res.body
            size = len(data)
            head = response_head(res.status, res.headers, res.content_type, size, self.keep_alive)
            if head is not None:
                self.response_size = size
                self.response_func = None  # type: ignore[assignment]  # as Sanic's own: sent whole
                await self._send(head + data if data else head)
                self.stage = Stage.IDLE
                return
        await super().http1_response_header(data, end_stream)


class EdgeProtocol(WebSocketProtocol, _TidyResponseHead):
    """HTTP/1.1 and WebSocket as Sanic serves them, plus:

    - a deadline for the request head: a connection's first request head, and every later one from its
      first byte, must be complete within the request timeout (Sanic's own timer restarts on every byte
      received, so a client sending one byte a second was never cut). A connection that never sends a
      byte is closed at that deadline too; between requests the keep-alive timeout applies.
    - a deadline for the request body, counted from the end of its head (the response timeout Sanic
      applies meanwhile restarts on every byte too): past it the request is answered 408 if no answer
      has started, the rest of the body is not waited for, and the connection is closed.
    - a lingering close as nginx's: when Sanic refuses a request before reading its body (413 on
      Content-Length) it closes while the client may still be sending, and closing with unread data
      sends a reset that can make the client's kernel drop our error response unread. Instead: send
      FIN, read and drop what still arrives (bounded in time and bytes) until the client's EOF, close.
    - the response-head tidying of ``_TidyResponseHead``, and the subprotocol /v1/stream chose.

    Sanic's protocol classes use ``__slots__`` (its metaclass gives every subclass an empty one), so the
    state lives in the slots declared here, on the one class that has any: two bases with slots of
    their own cannot be combined.
    """

    HTTP_CLASS: type[Http] = EdgeHttp
    __slots__ = ("_body_deadline", "_discarded", "_head_deadline", "_lingering", "ws_intake")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lingering = False
        self._discarded = 0
        self._head_deadline: float | None = None
        self._body_deadline: float | None = None
        # What the WebSocket's parser is fed through, once upgraded (edge.wsintake).
        self.ws_intake: FrameIntake | None = None

    def connection_made(self, transport: Any) -> None:
        self._head_deadline = current_time() + self.request_timeout
        super().connection_made(transport)

    def check_timeouts(self) -> None:
        task, http, deadline = self._task, getattr(self, "_http", None), self._head_deadline
        if (
            task is not None
            and http is not None
            and deadline is not None
            and http.stage in (Stage.IDLE, Stage.REQUEST)
            and current_time() > deadline
        ):
            if http.stage is Stage.REQUEST:  # a partial head gets a 408; a silent connection just a FIN
                http.exception = RequestTimeout("the request head did not arrive in time")
            task.cancel()
            return
        deadline = self._body_deadline
        if task is not None and http is not None and deadline is not None and current_time() > deadline:
            if http.stage is Stage.HANDLER:  # no answer started yet: a 408
                http.exception = EdgeError("the request body did not arrive in time", type="request_timeout")
            http.request_body = None  # nothing more to read: no draining the rest after the answer
            http.keep_alive = False
            task.cancel()
            return
        super().check_timeouts()  # type: ignore[no-untyped-call]

    async def websocket_handshake(self, request: Request, subprotocols: Sequence[str] | None = None) -> Any:
        # /v1/stream decides per request what the answer selects (the client's own spelling of "svc", or
        # nothing when the key came in Authorization); the route's fixed list would refuse both.
        chosen = getattr(request.ctx, "ws_subprotocols", subprotocols)
        # The largest message a client may send (edge.streamlimits): larger closes with 1009. Reads are
        # bounded besides: Sanic's assembler holds one message and pauses reading until it is taken;
        # sends wait for the transport's buffer to drain (a client that does not read holds one message
        # per sender, and its stream counts against its key's limit).
        config = getattr(self.app.ctx, "config", EdgeConfig)
        self.websocket_max_size = config.stream_max_message_bytes
        ws = await super().websocket_handshake(request, chosen)
        self.ws_intake = FrameIntake(ws, self.transport, self.loop)
        return ws

    def refusal_answer(self, limit: Limit) -> bytes:
        """A connection refused by ``limit`` (svckit.connlimits), answered in the edge's error body:
        429 ``rate_limited`` for the client's own connections, 503 ``service_unavailable`` for the
        process's; the message names the limit."""
        status, message = refusal(limit)
        error_type = "rate_limited" if status == 429 else "service_unavailable"
        rid = new_request_id()
        body = json.dumps(error_body(error_type, message, rid, DOCS_PATH), separators=(",", ":"))
        return plain_answer(status, body, "application/json", (("X-Request-Id", rid),))

    def close(self, timeout: float | None = None) -> None:
        transport = self.transport
        if (
            self._lingering
            or self.websocket is not None
            or transport is None
            or transport.is_closing()
            or not transport.can_write_eof()
        ):
            super().close(timeout)
            return
        self._lingering = True
        if self._callback_check_timeouts:
            self._callback_check_timeouts.cancel()
        transport.resume_reading()
        transport.write_eof()
        self.loop.call_later(LINGER_SECONDS, self._end_linger)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.ws_intake is not None:
            self.ws_intake.ended()
        # Sanic leaves its timeout check (every 30 s by default) pending on a closed connection; it would
        # hold the protocol, its WebSocket and the stream's session that long (issue 20: RSS under floods).
        if self._callback_check_timeouts:
            self._callback_check_timeouts.cancel()
        super().connection_lost(exc)  # type: ignore[no-untyped-call]

    def eof_received(self) -> bool | None:
        # A WebSocket's EOF goes after the bytes its intake still holds (and ends a linger).
        intake = self.ws_intake
        if intake is not None:
            return intake.eof_received()
        return super().eof_received()

    def close_if_idle(self) -> bool:
        if self._lingering:  # shutting down: nothing more to wait for
            self._end_linger()
            return True
        return bool(super().close_if_idle())  # type: ignore[no-untyped-call]

    def _end_linger(self) -> None:
        super().close()

    def data_received(self, data: bytes) -> None:
        if not self._lingering:
            # WebSocketProtocol.data_received's dispatch, without its frame in between; a WebSocket's bytes
            # go through its intake (parsed in bounded slices, each admitted by the stream's limits).
            intake = self.ws_intake
            if intake is not None:
                intake.data_received(data)
            elif self.websocket is not None:
                self.websocket.data_received(data)  # type: ignore[no-untyped-call]
            else:
                HttpProtocol.data_received(self, data)
            return
        self._discarded += len(data)
        if self._discarded > LINGER_BYTES and self.transport is not None:
            self.transport.abort()
        return None
