"""GET /v1/stream: the account's events over a WebSocket (decisions.md "Stream").

The key comes from ``Sec-WebSocket-Protocol: svc, <key>`` (or Authorization) and is checked before
the handshake, so a refusal is an ordinary HTTP error body. The answer selects the client's ``svc`` (any
case, spelt back as offered) and never the key; with the key in Authorization and no subprotocol offered,
it selects none. Events
come from webhookd's StreamEvents, filtered by the key's scopes. A WatchKeyChanges message about the
key (or its account) re-checks it at once; a revoked or expired key's stream is closed with 4001.

Limits (edge.streamlimits, docs/edge.md "Stream limits"): a key or account with as many open streams as
it may have is refused before the handshake (429 rate_limited); a client sending more frames than its
token bucket allows is closed with 1008; a message larger than ``stream_max_message_bytes`` with 1009
(edge.server.EdgeProtocol sets the WebSocket's limit). Frames are admitted as they are parsed, in bounded
slices (edge.wsintake): after a close for the client's fault nothing more is parsed.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
import time
from collections.abc import Sequence
from typing import Any

import grpc
from sanic import Blueprint

from edge.authcache import Caller
from edge.context import EdgeRequest
from edge.convert import event as event_json
from edge.credentials import stream_credential
from edge.environments import Environment
from edge.exceptions import EdgeError, RateLimited
from edge.jsonbody import JsonProblem, parse_json
from edge.metrics import STREAM_LIMITED, STREAMS
from edge.streamfilter import may_read, unknown_patterns, wanted
from edge.streamlimits import CLOSE_RATE_LIMITED, KEY, OPENS, MessageBucket, refusal_message
from edge.wsintake import close_reason, intake_of
from svckit.clients import ClientError, ResponseStream
from svckit.clock import utcnow
from svckit.errors import http_status
from svckit.frameworks import Frame, Opcode, WebsocketImplProtocol
from svckit.logs import request_id_var
from svckit.prototables import HOOKS_ENVIRONMENT
from travel.auth.v1 import auth_pb2
from travel.webhooks.v1 import webhooks_pb2

log = logging.getLogger(__name__)
bp = Blueprint("stream")
CLOSE_KEY_INVALID = 4001
CLOSE_INTERNAL = 1011
CLOSE_INVALID_DATA = 1007
CLOSE_POLICY = 1008
# Closes for the client's fault: the close frame goes out at once and nothing more is parsed (edge.wsintake).
_FAULTS = (CLOSE_INVALID_DATA, CLOSE_POLICY)
# Retry-After of a stream refused by a limit: a slot frees only when one of the key's streams closes.
LIMITED_RETRY_AFTER = 5


def recheck_close(error_type: str, message: str) -> tuple[int, str] | None:
    """How a stream whose key re-check did not pass is closed: 4001 only when the key itself was refused
    (docs/edge.md defines 4001 as revoked or expired). Trouble on our side is no revocation: an
    unreachable authsvc leaves the stream open (None: checked again on the watch's next SYNC), any other
    failure of ours closes it with 1011, and the client reconnects."""
    if error_type == "service_unavailable":
        return None
    if http_status(error_type) >= 500:
        return CLOSE_INTERNAL, "internal_error: the key could not be checked; reconnect"
    return CLOSE_KEY_INVALID, f"{error_type}: {message}"


@bp.on_request
async def authenticate_stream(request: EdgeRequest) -> None:
    gate = request.app.ctx.gate
    gate.request_id(request)
    env = gate.hosts.environment(request.headers.get("host"))
    if request.headers.get("upgrade", "").lower() != "websocket":
        raise EdgeError(
            "GET /v1/stream needs a WebSocket upgrade (Upgrade: websocket)", type="invalid_request"
        )
    key, protocol = stream_credential(
        request.headers.getall("sec-websocket-protocol", []), request.headers.get("authorization")
    )
    caller, source = await gate.authenticate(request, key, env, "", False)
    cfg = request.app.ctx.config
    maxima = (cfg.stream_max_per_key, cfg.stream_max_per_account)
    slots = request.app.ctx.stream_slots
    limit = slots.refused(caller.key_id, caller.account_id, *maxima)
    if limit is None and not slots.may_open(
        caller.account_id, time.monotonic(), cfg.stream_opens_per_second, cfg.stream_open_burst
    ):
        limit, maxima = OPENS, (0, round(cfg.stream_opens_per_second))
    if limit is not None:
        STREAM_LIMITED.labels(limit).inc()
        raise RateLimited(LIMITED_RETRY_AFTER, refusal_message(limit, maxima[0 if limit == KEY else 1]))
    rctx = request.ctx
    rctx.stream_auth = (key, env, source, caller)
    # What the handshake answer selects (edge.server.EdgeProtocol): the client's own "svc", or none.
    rctx.ws_subprotocols = [protocol] if protocol else None


class StreamSession:
    def __init__(
        self,
        request: EdgeRequest,
        ws: WebsocketImplProtocol,
        key: str,
        env: Environment,
        source: str,
        caller: Caller,
    ) -> None:
        self.app_ctx = request.app.ctx
        self.authorizer = self.app_ctx.authorizer
        self.hooks = self.app_ctx.hooks
        self.ws = ws
        self.key = key
        self.env = env
        self.source = source
        self.caller = caller
        self.request_id = request.ctx.rid or ""
        self.done = asyncio.Event()
        self.close_code = 1000
        self.close_reason = ""
        self.types: list[str] = []
        self.last_event_id = ""
        self.pump: asyncio.Task[None] | None = None
        self.call: ResponseStream[webhooks_pb2.StreamEventsResponse] | None = None
        self.expiry: asyncio.TimerHandle | None = None
        self.tasks: set[asyncio.Task[Any]] = set()
        cfg = self.app_ctx.config
        self.bucket = MessageBucket(cfg.stream_messages_per_second, cfg.stream_message_burst)
        self.intake = intake_of(ws)
        self.intake.serve(self)

    def admit(self, frames: Sequence[Frame], now: float) -> int:
        """Every frame the client sends but its close takes a token, as it is parsed (edge.wsintake): a
        message in one frame is one, as are ping and pong frames (answered inside the WebSocket layer, they
        never reach ``read``) and each fragment of a fragmented message (each costs a parse). The first
        frame without a token closes the stream with 1008, and nothing after it is parsed."""
        bucket = self.bucket
        for i, frame in enumerate(frames):
            if frame.opcode is not Opcode.CLOSE and not bucket.take(now):
                self.rate_limited()
                return i
        return len(frames)

    def parser_failed(self, code: int, reason: str) -> None:
        self.finish(code, reason)

    def rate_limited(self) -> None:
        STREAM_LIMITED.labels("messages").inc()
        rate = self.app_ctx.config.stream_messages_per_second
        self.finish(CLOSE_POLICY, f"rate_limited: more than {rate:g} messages a second")

    # -- closing ---------------------------------------------------------------------------------
    def finish(self, code: int, reason: str) -> None:
        if not self.done.is_set():
            self.close_code, self.close_reason = code, reason
            self.done.set()
            if code in _FAULTS:
                self.intake.fault(code, reason)

    def on_key_change(self, kind: int, key_id: str, account_id: str) -> None:
        if kind == auth_pb2.KEY_CHANGE_KIND_REVOKED and key_id == self.caller.key_id:
            self.finish(CLOSE_KEY_INVALID, "invalid_api_key: the API key was revoked")
            return
        if (
            kind == auth_pb2.KEY_CHANGE_KIND_SYNC
            or key_id == self.caller.key_id
            or (account_id == self.caller.account_id and not key_id)
        ):
            self._spawn(self.recheck())

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def recheck(self) -> None:
        try:
            answer = await self.authorizer.answer(
                self.key, self.env, "", self.source, False, self.request_id, use_cache=False
            )
        except EdgeError as exc:
            self.refused(exc.type, exc.message)
            return
        if not answer.allowed or answer.caller is None:
            self.refused(answer.error_type, answer.error_message)
            return
        self.caller = answer.caller
        self.arm_expiry()

    def refused(self, error_type: str, message: str) -> None:
        closing = recheck_close(error_type, message)
        if closing is not None:
            self.finish(*closing)

    def arm_expiry(self) -> None:
        if self.expiry is not None:
            self.expiry.cancel()
            self.expiry = None
        expires = self.caller.expires_at
        if expires is not None:
            delay = (expires - utcnow()).total_seconds()
            loop = asyncio.get_running_loop()
            self.expiry = loop.call_later(
                max(delay, 0.0), self.finish, CLOSE_KEY_INVALID, "invalid_api_key: the API key has expired"
            )

    # -- sending ---------------------------------------------------------------------------------
    async def send(self, message: dict[str, Any]) -> None:
        await self.ws.send(json.dumps(message))

    async def pump_events(self, since: str) -> None:
        delay = 0.2
        while not self.done.is_set():
            try:
                call = self.hooks.stream_events(
                    webhooks_pb2.StreamEventsRequest(
                        account_id=self.caller.account_id,
                        environment=HOOKS_ENVIRONMENT.pb(self.env),
                        since_event_id=since or self.last_event_id,
                    )
                )
                self.call = call
                async for msg in call:
                    delay = 0.2
                    ev = msg.event
                    self.last_event_id = ev.id
                    since = ""
                    envelope = event_json(ev)
                    data = envelope.get("data") if isinstance(envelope.get("data"), dict) else None
                    if wanted(self.types, ev.type) and may_read(self.caller.scopes, ev.type, data):
                        await self.send({"type": "event", "event": envelope})
            except asyncio.CancelledError:
                call.cancel()  # now: a cancelled read need not end the call (the interceptors' wrapper)
                raise
            except ClientError as exc:
                if exc.code in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT):
                    await self.send({"type": "error", "error": {"type": exc.type, "message": exc.detail}})
                    return  # the client may subscribe again
                log.warning("StreamEvents broke; resuming", extra={"code": exc.code.name})
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)

    def restart_pump(self, since: str) -> None:
        if self.pump is not None:
            self.pump.cancel()
        self.pump = asyncio.ensure_future(self.pump_events(since))
        self.pump.add_done_callback(self._pump_done)

    def _pump_done(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.warning("stream send failed", extra={"error": repr(task.exception())})
            self.finish(CLOSE_INTERNAL, "internal error")

    async def pings(self) -> None:
        interval = self.app_ctx.config.stream_ping_seconds
        while not self.done.is_set():
            await asyncio.sleep(interval)
            await self.send({"type": "ping"})

    async def read(self) -> None:
        while not self.done.is_set():
            raw = await self.ws.recv()
            if raw is None:
                self.finish(1000, "")
                return
            await self.handle(raw)  # its frames were admitted as they were parsed (admit)

    async def handle(self, raw: str | bytes) -> None:
        try:
            msg = parse_json(raw)
        except JsonProblem as exc:
            if exc.kind == "syntax":
                await self.refuse("a message must be a JSON object")
            else:
                # Not text (1007) or over a limit (1008): the connection is closed, as RFC 6455 says.
                code = CLOSE_INVALID_DATA if exc.kind == "unicode" else CLOSE_POLICY
                self.finish(code, f"invalid_request: {exc.message}")
            return
        if not isinstance(msg, dict):
            await self.refuse("a message must be a JSON object")
            return
        kind = msg.get("type")
        if kind == "ping":
            await self.send({"type": "pong"})
        elif kind == "pong":
            return
        elif kind == "subscribe":
            events = msg.get("events", [])
            since = msg.get("since")
            if since is None:  # absent or null: no position (``subscribed`` writes it as null)
                since = ""
            if not isinstance(events, list) or not all(isinstance(e, str) for e in events):
                await self.refuse("subscribe.events must be a list of event kinds")
                return
            unknown = unknown_patterns(events)
            if unknown:
                await self.refuse(f"subscribe.events: unknown event kind(s) {', '.join(unknown)}")
                return
            if not isinstance(since, str) or (since and not since.startswith("evt_")):
                await self.refuse("subscribe.since must be an event id (evt_...)")
                return
            if since and not await self.known_event(since):
                return
            self.types = events
            self.restart_pump(since)
            await self.send({"type": "subscribed", "events": events, "since": since or None})
        else:
            await self.refuse(f"unknown message type {kind!r}: send subscribe or ping")

    async def known_event(self, event_id: str) -> bool:
        """Is ``since`` an event of this account and environment? If not, the client gets that error only
        (never ``subscribed`` first), and its subscription is unchanged."""
        try:
            await self.hooks.get_event(
                webhooks_pb2.GetEventRequest(
                    account_id=self.caller.account_id,
                    environment=HOOKS_ENVIRONMENT.pb(self.env),
                    event_id=event_id,
                )
            )
        except ClientError as exc:
            await self.send({"type": "error", "error": {"type": exc.type, "message": exc.detail}})
            return False
        return True

    async def refuse(self, message: str) -> None:
        await self.send({"type": "error", "error": {"type": "invalid_request", "message": message}})

    # -- lifetime --------------------------------------------------------------------------------
    async def run(self) -> None:
        # The session's calls to webhookd and authsvc carry the handshake's request id (the tasks below
        # copy this context).
        token = request_id_var.set(self.request_id)
        try:
            await self._run()
        finally:
            request_id_var.reset(token)
            self.intake.release()

    async def _run(self) -> None:
        # The slot is taken here, after the handshake (authenticate_stream only checked): a handshake that
        # raced another past that check is accepted, then closed with 4429.
        cfg, slots = self.app_ctx.config, self.app_ctx.stream_slots
        key_id, account_id = self.caller.key_id, self.caller.account_id
        limit = slots.acquire(key_id, account_id, cfg.stream_max_per_key, cfg.stream_max_per_account)
        if limit is not None:
            STREAM_LIMITED.labels(limit).inc()
            with contextlib.suppress(Exception):
                await self.ws.close(CLOSE_RATE_LIMITED, f"rate_limited: too many open streams ({limit})")
            return
        try:
            await self._serve()
        finally:
            slots.release(key_id, account_id)

    async def _serve(self) -> None:
        self.authorizer.add_listener(self.on_key_change)
        self.app_ctx.streams.add(self)
        STREAMS.inc()
        self.arm_expiry()
        self.restart_pump("")
        reader = asyncio.ensure_future(self.read())
        pinger = asyncio.ensure_future(self.pings())
        reader.add_done_callback(lambda _t: self.finish(1000, ""))
        pinger.add_done_callback(lambda _t: self.finish(1000, ""))
        try:
            await self.done.wait()
        finally:
            self.authorizer.remove_listener(self.on_key_change)
            self.app_ctx.streams.discard(self)
            STREAMS.dec()
            if self.expiry is not None:
                self.expiry.cancel()
            for task in (reader, pinger, self.pump, *self.tasks):
                if task is not None:
                    task.cancel()
            if self.call is not None:
                self.call.cancel()
            intake = self.intake
            if not intake.discarding:
                with contextlib.suppress(Exception):
                    await self.ws.close(self.close_code, close_reason(self.close_reason))
            else:
                # Closed for the client's fault (the close frame is out): what it still sends is dropped
                # unparsed until it is quiet, so that closing sends no reset that could lose that frame.
                await intake.linger()
            log.info(
                "stream closed",
                extra={
                    "key_id": self.caller.key_id,
                    "code": self.close_code,
                    "reason": self.close_reason,
                    "frames": intake.frames,
                    "discarded_bytes": intake.discarded,
                    "at": dt.datetime.now(dt.UTC).isoformat(),
                },
            )


async def stream(request: EdgeRequest, ws: WebsocketImplProtocol) -> None:
    auth = request.ctx.stream_auth
    assert auth is not None  # authenticate_stream admitted the handshake, or it was refused there
    key, env, source, caller = auth
    await StreamSession(request, ws, key, env, source, caller).run()


# Registered by call: Sanic's websocket decorator is untyped (it would make the handler untyped too).
bp.add_websocket_route(stream, "/v1/stream", subprotocols=["svc"])
