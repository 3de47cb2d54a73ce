"""Authorisation through authsvc with the cache in front, and the WatchKeyChanges loop that keeps it
honest. The cache is consulted first only while the watch stream is up; while it is down every request
asks authsvc, and a still-valid cached answer is used only if authsvc cannot be reached and the watch
broke no more than WATCH_GRACE ago (edge.authcache.cache_use). Otherwise the edge fails closed (503
service_unavailable). Several authsvc addresses share the AuthClient's one channel
(svckit.clients.channels): calls and the watch go to whichever is connected."""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from google.protobuf import duration_pb2

from edge.authcache import (
    WATCH_RECONNECT,
    WATCH_SILENCE,
    Answer,
    AuthCache,
    CacheUse,
    Caller,
    cache_use,
    ttl_for,
)
from edge.environments import Environment
from edge.exceptions import EdgeError, RateLimited, UpstreamUnavailable, edge_error, peer_unavailable
from edge.gcra import US
from edge.unknownkeys import Refused, UnknownKeyBudget, got
from svckit.apikeys import INVALID_API_KEY_MESSAGE
from svckit.clients import AuthClient, ClientError, PeerUnavailable, ResponseStream, request_id_context
from svckit.clock import utcnow
from svckit.protos import datetime_of
from svckit.prototables import ACCOUNT_MODE, ACCOUNT_STATUS, AUTH_ENVIRONMENT, KEY_STATUS
from travel.auth.v1 import auth_pb2

log = logging.getLogger(__name__)

# Silence after which authsvc sends a heartbeat on the watch (well under WATCH_SILENCE).
HEARTBEAT_INTERVAL = 0.2

# (kind, key_id, account_id) of one WatchKeyChanges message.
ChangeListener = Callable[[int, str, str], None]


def key_digest(api_key: str) -> bytes:
    """What the cache is keyed by: the key's SHA-256, never the plaintext."""
    return hashlib.sha256(api_key.encode()).digest()


def caller_from(resp: auth_pb2.AuthorizeResponse, env: Environment) -> Caller | None:
    if not resp.HasField("key"):
        return None
    key, account = resp.key, resp.account
    expires = datetime_of(key.expires_at) if key.HasField("expires_at") else None
    status = KEY_STATUS.get(key.status, "active")
    headers: tuple[tuple[str, str], ...] = ()
    if status == "expiring" and expires is not None:
        from edge.environments import deprecation_headers

        rotated = datetime_of(key.rotated_at) if key.HasField("rotated_at") else None
        headers = tuple(deprecation_headers(True, rotated, expires).items())
    return Caller(
        key_id=key.id,
        account_id=key.account_id or account.id,
        environment=env.value,
        scopes=tuple(key.scopes),
        key_status=status,
        key_hint=key.hint,
        expires_at=expires,
        account_name=account.name,
        account_mode=ACCOUNT_MODE.get(account.mode, ""),
        account_status=ACCOUNT_STATUS.get(account.status, ""),
        daily_search_allowance=account.daily_search_allowance,
        rate_limit=float(key.rate_limit),
        headers=headers,
        **_certification(key.id, account),
    )


def _certification(key_id: str, account: auth_pb2.Account) -> dict[str, Any]:
    """The open certification run's fields of a Caller, when it belongs to this key (edge.certification)."""
    cert = account.certification
    if not cert.open_run_id or cert.open_run_key_id != key_id:
        return {}
    return {"cert_run_id": cert.open_run_id, "cert_run_ends": cert.open_run_ends_at.ToNanoseconds() / 1e9}


class Authorizer:
    def __init__(
        self,
        auth: AuthClient,
        *,
        cache: AuthCache | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], dt.datetime] = utcnow,
        unknown_keys: UnknownKeyBudget | None = None,
    ) -> None:
        self.auth = auth
        self.cache = cache if cache is not None else AuthCache()
        # Look-ups of keys authsvc does not know, per source (edge.unknownkeys).
        self.unknown_keys = unknown_keys if unknown_keys is not None else UnknownKeyBudget()
        self.monotonic = monotonic
        self.wall = wall
        self._listeners: set[ChangeListener] = set()
        self._synced = asyncio.Event()
        self._inflight: dict[tuple[object, ...], asyncio.Future[Answer]] = {}
        self.reconnects = 0
        # Monotonic time since when no watch stream has been up (None: one is, after its SYNC).
        self.watch_down_since: float | None = monotonic()
        # Monotonic time the watch was last heard from, once it has sent a heartbeat (None: not yet, or
        # an authsvc that does not send them).
        self.watch_heard: float | None = None

    def cache_use(self) -> CacheUse:
        return cache_use(self.watch_down_since, self.monotonic(), self.watch_heard)

    # -- authorisation -------------------------------------------------------------------------
    async def authorize(
        self,
        api_key: str,
        env: Environment,
        scope: str,
        source: str,
        is_write: bool,
        request_id: str,
        *,
        use_cache: bool = True,
    ) -> Caller:
        """The Caller for an allowed request; raises EdgeError with authsvc's refusal otherwise."""
        answer = await self.answer(api_key, env, scope, source, is_write, request_id, use_cache=use_cache)
        if not answer.allowed or answer.caller is None:
            raise EdgeError(
                answer.error_message or "the API key was refused", type=answer.error_type or "invalid_api_key"
            )
        return answer.caller

    async def answer(
        self,
        api_key: str,
        env: Environment,
        scope: str,
        source: str,
        is_write: bool,
        request_id: str,
        *,
        use_cache: bool = True,
        digest: bytes | None = None,
    ) -> Answer:
        ck = (digest or key_digest(api_key), env, scope, source, is_write)
        if not use_cache:
            return await self._ask(ck, api_key, env, scope, source, is_write, request_id)
        hit = self.cached(*ck)
        if hit is not None:
            return hit
        # One call to authsvc per distinct question at a time (no stampede when an entry expires).
        pending = self._inflight.get(ck)
        if pending is not None:
            return await asyncio.shield(pending)
        # A place in the unknown-key budgets first, given back once the answer names a key.
        ticket = self.unknown_keys.admit(source, int(self.monotonic() * US))
        if isinstance(ticket, Refused):
            raise RateLimited(ticket.retry_after / US, ticket.message)
        task = asyncio.ensure_future(self._ask(ck, api_key, env, scope, source, is_write, request_id))
        self._inflight[ck] = task
        task.add_done_callback(lambda _t: self._inflight.pop(ck, None))
        task.add_done_callback(lambda t: self.unknown_keys.settle(ticket, int(self.monotonic() * US), got(t)))
        return await asyncio.shield(task)

    def cached(
        self, digest: bytes, env: Environment, scope: str, source: str, is_write: bool
    ) -> Answer | None:
        """The cached answer when the cache may answer first (``cache_use`` FIRST: the watch is up and
        heard from), else None: then ``answer`` asks authsvc. No coroutine on the common path, and
        ``cache_use``'s FIRST inlined (every request passes here; tests/unit/test_edge_authorizer_cached.py
        holds the two to the same table)."""
        now = self.monotonic()
        heard = self.watch_heard
        if self.watch_down_since is not None or (heard is not None and now - heard > WATCH_SILENCE):
            return None
        return self.cache.get((digest, env, scope, source, is_write), now)

    async def _ask(
        self,
        ck: tuple[object, ...],
        api_key: str,
        env: Environment,
        scope: str,
        source: str,
        is_write: bool,
        rid: str,
    ) -> Answer:
        cache = self.cache
        generation = cache.generation
        try:
            with request_id_context(rid):
                resp = await self.auth.authorize(
                    auth_pb2.AuthorizeRequest(
                        api_key=api_key,
                        environment=AUTH_ENVIRONMENT.pb(env),
                        required_scope=scope,
                        source_address=source,
                        is_write=is_write,
                    )
                )
        except PeerUnavailable as exc:
            stale = cache.get(ck, self.monotonic()) if self.cache_use() is not CacheUse.NEVER else None
            if stale is not None:
                return stale
            peer_unavailable("authsvc", exc)  # counted; one summary line per 10 s, not one per request
            raise UpstreamUnavailable(
                "the authorisation service cannot be reached; the request was refused (fail closed)"
            ) from None
        except ClientError as exc:
            raise edge_error(exc) from None
        caller = caller_from(resp, env)
        if caller is not None and cache.revoked(caller.key_id, self.monotonic()):
            # An authsvc that has not yet heard of a revocation the watch told of (edge.authcache.HOLD).
            answer = Answer(False, "invalid_api_key", INVALID_API_KEY_MESSAGE, caller)
        elif resp.decision == auth_pb2.DECISION_ALLOW:
            answer = Answer(True, caller=caller)
        else:
            answer = Answer(False, resp.error_type or "invalid_api_key", resp.error_message, caller)
        ttl = ttl_for(
            resp.cache_ttl.ToTimedelta().total_seconds(),
            caller.expires_at if caller else None,
            self.wall(),
        )
        cache.put(ck, answer, ttl, self.monotonic(), generation)
        return answer

    # -- the watch ------------------------------------------------------------------------------
    def add_listener(self, listener: ChangeListener) -> None:
        self._listeners.add(listener)

    def remove_listener(self, listener: ChangeListener) -> None:
        self._listeners.discard(listener)

    def _notify(self, kind: int, key_id: str, account_id: str) -> None:
        for listener in list(self._listeners):
            try:
                listener(kind, key_id, account_id)
            except Exception:
                log.exception("key change listener failed")

    def apply_change(self, kind: int, key_id: str, account_id: str) -> None:
        cache = self.cache
        now = self.monotonic()
        if kind == auth_pb2.KEY_CHANGE_KIND_SYNC:
            cache.flush()
            self.watch_down_since = None
            self._synced.set()
        elif kind == auth_pb2.KEY_CHANGE_KIND_ACCOUNT_UPDATED:
            cache.drop_account(account_id)
            cache.hold("account", account_id, now)
        elif key_id:
            cache.drop_key(key_id)
            cache.hold("revoked" if kind == auth_pb2.KEY_CHANGE_KIND_REVOKED else "key", key_id, now)
        elif account_id:
            cache.drop_account(account_id)
            cache.hold("account", account_id, now)
        else:
            cache.flush()
        self._notify(kind, key_id, account_id)

    async def wait_synced(self, seconds: float) -> bool:
        try:
            await asyncio.wait_for(self._synced.wait(), seconds)
        except TimeoutError:
            return False
        return True

    async def watch_forever(self) -> None:
        delay = 0.1
        while True:
            call = self.auth.watch_key_changes(
                auth_pb2.WatchKeyChangesRequest(
                    heartbeat_interval=duration_pb2.Duration(nanos=int(HEARTBEAT_INTERVAL * 1e9))
                )
            )
            try:
                async for _ in self._follow(call):
                    delay = 0.1
            except asyncio.CancelledError:
                call.cancel()
                raise
            except ClientError as exc:
                log.warning(
                    "WatchKeyChanges broke; the cache is no longer trusted first",
                    extra={"code": exc.code.name},
                )
            except TimeoutError:
                log.warning(
                    "WatchKeyChanges went silent; reconnecting, the cache is no longer trusted first",
                    extra={"silence": WATCH_RECONNECT},
                )
            except Exception:
                log.exception("WatchKeyChanges failed")
            call.cancel()
            if self.watch_down_since is None:
                # Broken now, or already when it went silent (as cache_use has counted since then).
                now, heard = self.monotonic(), self.watch_heard
                self.watch_down_since = now if heard is None else min(now, heard + WATCH_SILENCE)
            self.watch_heard = None
            self._synced.clear()
            self.reconnects += 1
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)

    async def _follow(self, call: ResponseStream[auth_pb2.WatchKeyChangesResponse]) -> AsyncIterator[None]:
        """Applies the stream's messages, yielding after each; raises TimeoutError once a stream that
        heartbeats stays silent for WATCH_RECONNECT."""
        while True:
            msg = await self._next(call)
            if msg is None:
                return
            if msg.kind == auth_pb2.KEY_CHANGE_KIND_HEARTBEAT or self.watch_heard is not None:
                self.watch_heard = self.monotonic()
            if msg.kind != auth_pb2.KEY_CHANGE_KIND_HEARTBEAT:
                self.apply_change(msg.kind, msg.key_id, msg.account_id)
            yield None

    async def _next(
        self, call: ResponseStream[auth_pb2.WatchKeyChangesResponse]
    ) -> auth_pb2.WatchKeyChangesResponse | None:
        """The stream's next message; TimeoutError once a stream that heartbeats was silent for
        WATCH_RECONNECT. A shorter silence (WATCH_SILENCE) only stops the cache answering first
        (``cache_use``): heartbeats held up on a busy edge are still read, in order, from the same stream,
        while a reconnect's SYNC would empty the cache and send every partner's next request to authsvc."""
        if self.watch_heard is None:
            return await call.read()
        return await asyncio.wait_for(call.read(), WATCH_RECONNECT)
