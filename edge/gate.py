"""What every partner request goes through before its handler runs, in this order:

1. Host -> environment (421 misdirected_request)
2. Accept admits JSON (406 not_acceptable)
3. API key from Authorization (401 missing_api_key / invalid_api_key); a key whose prefix names the
   other environment is refused here (401 environment_mismatch) without asking authsvc
4. source address (trusted proxies), then authsvc's answer through the cache: key, environment,
   allow list, scope, read-only account (401/403, 503 when authsvc is unreachable: fail closed)
   then the key's request rate (429 rate_limited with Retry-After; edge.ratelimit, or shared by
   every edge in Redis: edge.sharedlimit)
5. POST: Idempotency-Key (400), Content-Type (415) and JSON body (400), then the idempotency claim
   (replay, 409 or 422)
6. X-Partner-Customer-Ref -> traveller id through authsvc where the route uses one (400 invalid_customer_ref)
7. sandbox: X-Sandbox-Trigger (edge.triggers), after everything above so the production path runs first
"""

from __future__ import annotations

import logging
import time
from bisect import bisect_left
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from multidict import istr
from sanic.response import HTTPResponse

from edge.authcache import Answer, Caller
from edge.authorizer import Authorizer, key_digest
from edge.certification import RUN_ROUTES, CertRecorder, record_refusal, under_run
from edge.config import EdgeConfig
from edge.credentials import key_from_authorization
from edge.docurls import DocBases
from edge.environments import Environment, HostMap, key_environment
from edge.exceptions import EdgeError, RateLimited, edge_error
from edge.idempotency import IdempotencyStore, fingerprint_headers, request_hash
from edge.jsonbody import JsonProblem, parse_json
from edge.metrics import (
    LATENCY_BOUNDS,
    RESPONSES_BY_STATUS,
    ROUTE_LATENCY,
    SANDBOX_TRIGGERS,
    count_response,
    route_latency,
)
from edge.negotiation import (
    check_accept,
    check_customer_ref,
    check_idempotency_key,
    check_json_content_type,
    prefers_csv,
)
from edge.publisher import Publisher
from edge.ratelimit import RateLimiter
from edge.requestcontext import BareRequest
from edge.requestlog import RequestLog
from edge.responses import X_REQUEST_ID, EdgeResponse, error_response, new_request_id
from edge.samples import STATES, low_balance, quota_threshold
from edge.sources import source_address
from edge.triggers import FORCED_MESSAGES, RouteKind, Trigger, decide
from edge.usagecounts import UsageCounter, new_cell
from svckit.apikeys import prefix_of
from svckit.clients import ClientError
from svckit.clock import utcnow
from svckit.connguard import accepted as connection_accepted
from svckit.logs import request_id_var
from svckit.pacing import RefusalPacer
from svckit.prototables import AUTH_ENVIRONMENT
from svckit.usagecounts import LATENCY_BOUNDS_S
from travel.auth.v1 import auth_pb2

if TYPE_CHECKING:
    from edge.sharedlimit import SharedLimiter

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Ctx:
    request_id: str
    environment: Environment
    caller: Caller
    source: str
    body: dict[str, Any] | None = None
    traveller_id: str = ""
    customer_ref: str = ""
    # A sandbox trigger whose effect comes after the route answers (booking_failed, payment_failed).
    trigger: Trigger | None = None
    # The POST's Idempotency-Key, passed down (webhookd, product upstreams) so a re-execution after an
    # edge crash is deduplicated there too.
    idempotency_key: str = ""
    # The error type of an error answer the handler made itself (a product upstream's, mapped by
    # edge.upstreamerrors), for the request log.
    error_type: str = ""
    # Filed in the request log whatever the second's sampling of successes (edge.requestlog): a read of a
    # whole event (GET /v1/events/{id}, what a thin delivery points at) is an access to personal data.
    audited: bool = False


# A handler answers at once or with an awaitable: a route whose common case needs no await (GET
# /v1/account from its caches) returns its response without a coroutine made and run per request.
Handler = Callable[..., Awaitable[HTTPResponse] | HTTPResponse]
# Distinct Accept values remembered as admitting JSON (Gate.check_accept): bounds what odd clients grow.
MAX_ACCEPTS = 256
# The request fields read on every request, as multidict keys: an ``istr`` skips folding the name's case.
HOST = istr("host")
AUTHORIZATION = istr("authorization")
ACCEPT = istr("accept")
SANDBOX_TRIGGER = istr("x-sandbox-trigger")


def check_key_environment(api_key: str, env: Environment) -> None:
    """401 environment_mismatch when the key's prefix names another environment than the Host's."""
    key_env = key_environment(api_key)
    if key_env is None or key_env is env:
        return
    prefix = prefix_of(api_key)  # the key's own brand (svckit.apikeys)
    if key_env is Environment.SANDBOX:
        msg = f"A test key ({prefix}) was used on the live host; use it on the sandbox host."
    else:
        msg = f"A live key ({prefix}) was used on the sandbox host; use a test key there."
    raise EdgeError(msg, type="environment_mismatch")


class Gate:
    def __init__(
        self,
        config: EdgeConfig,
        authorizer: Authorizer,
        store: IdempotencyStore,
        publisher: Publisher | None = None,
    ) -> None:
        self.config = config
        self.publisher = publisher
        self.hosts = HostMap(config.live_hosts, config.sandbox_hosts)
        self.authorizer = authorizer
        self.store = store
        # The request log (edge.requestlog): set by the app once its authsvc client is open.
        self.requests: RequestLog | None = None
        # Exact usage counts (edge.usagecounts): set by the app when counting is on.
        self.usage: UsageCounter | None = None
        # Certification runs' faults and full records (edge.certification): set by the app likewise.
        self.certs: CertRecorder | None = None
        self.proxies = tuple(config.trusted_proxies)
        # docUrl bases (edge.docurls): the configured one, or this edge's /docs on the request's host.
        self.docs = DocBases(config.docs_base, self.hosts, config.live_hosts)
        # A key's own limit (authsvc, Caller.rate_limit), else its environment's; 0 switches it off.
        self.rates = {"live": config.rate_limit_live, "sandbox": config.rate_limit_sandbox}
        self.limiter = RateLimiter()
        # Refusals past their source's allowance are held (svckit.pacing): a flood is answered slowly.
        self.pacer = RefusalPacer(config.pacing)
        # Accept header values that admit JSON (check_accept), at most MAX_ACCEPTS of them.
        self.json_accepts: set[str | None] = set()
        self.shared: SharedLimiter | None = None
        if config.redis:
            # redis-py (~0.1 s of imports) only in an edge whose limits are shared.
            from edge import sharedlimit

            self.shared = sharedlimit.SharedLimiter(
                config.redis, self.limiter, config.redis_prefix, config.redis_timeout
            )

    def rate_of(self, caller: Caller) -> float:
        return caller.rate_limit or self.rates.get(caller.environment, 0.0)

    async def limit(self, caller: Caller) -> None:
        if self.shared is None:
            self.limit_here(caller)
            return
        rate = self.rate_of(caller)
        if rate <= 0:
            return
        wait = await self.shared.check(caller.key_id, rate, time.monotonic())
        if wait > 0:
            raise RateLimited(wait)

    def limit_here(self, caller: Caller) -> None:
        """The key's request rate in this process's bucket (no Redis: no coroutine needed)."""
        rate = caller.rate_limit or self.rates.get(caller.environment, 0.0)  # rate_of, inlined
        if rate <= 0:
            return
        wait = self.limiter.check(caller.key_id, rate, time.monotonic())
        if wait > 0:
            raise RateLimited(wait)

    def pace(self, request: BareRequest, status: int, accepted: bool) -> Awaitable[None] | None:
        """What a refusal waits before it is written (svckit.pacing): None, at once. A refusal of a
        malformed X-Forwarded-For counts against the peer (the proxy) it came from."""
        try:
            source = self.source(request)
        except EdgeError:
            source = request.ip or "0.0.0.0"
        return self.pacer.refusal(request, source, status, accepted)

    async def aclose(self) -> None:
        if self.shared is not None:
            await self.shared.aclose()

    def request_id(self, request: BareRequest) -> str:
        rctx = request.ctx
        rid = rctx.rid
        if rid is None:
            rid = rctx.rid = new_request_id()
        return rid

    def source(self, request: BareRequest) -> str:
        peer = request.ip or "0.0.0.0"
        if not self.proxies:
            return peer
        return source_address(peer, request.headers.getall("x-forwarded-for", []), self.proxies)

    async def authenticate(
        self,
        request: BareRequest,
        api_key: str,
        env: Environment,
        scope: str,
        is_write: bool,
        digest: bytes | None = None,
    ) -> tuple[Caller, str]:
        check_key_environment(api_key, env)
        source = self.source(request)
        answer = await self.authorizer.answer(
            api_key, env, scope, source, is_write, self.request_id(request), digest=digest
        )
        caller = admitted(request, answer)
        connection_accepted(request)
        await self.limit(caller)
        return caller, source

    def credential(self, request: BareRequest) -> tuple[Environment, str, bytes]:
        """Environment, key and key digest of a request, remembered per connection: a keep-alive
        connection sending the same Host and Authorization again skips parsing, the key-prefix check and
        hashing (all functions of those two values alone)."""
        headers = request.headers
        host = headers.get(HOST)
        raw = headers.get(AUTHORIZATION)
        conn = request.conn_info.ctx if request.conn_info is not None else None
        memo = getattr(conn, "edge_credential", None)
        if memo is not None and memo[0] == raw and memo[1] == host:
            accept = headers.get(ACCEPT)
            if accept not in self.json_accepts:  # check_accept's memo, without the call
                self.check_accept(accept, request)
            return memo[2]  # type: ignore[no-any-return]
        env = self.hosts.environment(host)
        self.check_accept(headers.get(ACCEPT), request)
        api_key = key_from_authorization(raw)
        check_key_environment(api_key, env)
        found = (env, api_key, key_digest(api_key))
        if conn is not None:
            conn.edge_credential = (raw, host, found)
        return found

    def check_accept(self, accept: str | None, request: BareRequest | None = None) -> None:
        """edge.negotiation.check_accept, remembering the values that passed (a pure function of the
        value; clients send a handful of them): a set look-up instead of parsing the header each time. A
        route that offers CSV takes an Accept asking for it (``guarded(csv=True)``)."""
        if accept in self.json_accepts:
            return
        if request is not None and request.ctx.csv:
            return
        check_accept(accept)
        if len(self.json_accepts) < MAX_ACCEPTS:
            self.json_accepts.add(accept)

    async def run(
        self,
        request: BareRequest,
        handler: Handler,
        scope: str,
        is_write: bool,
        traveller: str,
        params: dict[str, Any],
        kind: RouteKind = RouteKind.OTHER,
    ) -> HTTPResponse:
        rctx = request.ctx
        rctx.started = time.time()
        rid = rctx.rid = new_request_id()
        # Every call to authsvc and webhookd from here on carries it (svckit.clients.interceptors).
        token = request_id_var.set(rid)
        try:
            env, api_key, digest = self.credential(request)
            source = self.source(request) if self.proxies else (request.ip or "0.0.0.0")
            # The cache's answer without a coroutine when it may answer first (edge.authcache.cache_use).
            answer = self.authorizer.cached(digest, env, scope, source, is_write)
            if answer is None:
                answer = await self.authorizer.answer(
                    api_key, env, scope, source, is_write, rid, digest=digest
                )
            caller = answer.caller
            if caller is None or not answer.allowed:
                if caller is not None and caller.cert_run_id and self.certs is not None:
                    record_refusal(self.certs, request, answer, caller)
                caller = admitted(request, answer)  # raises the refusal (keeping a known caller on ctx)
            rctx.caller = caller  # admitted's, inlined: request.ctx is a property, read once above
            connection_accepted(
                request
            )  # the connection's keep-alive, its source trusted (svckit.connlimits)
            if self.shared is None:  # limit_here inlined
                rate = caller.rate_limit or self.rates.get(caller.environment, 0.0)
                if rate > 0:
                    wait = self.limiter.check(caller.key_id, rate, time.monotonic())
                    if wait > 0:
                        raise RateLimited(wait)
            else:
                await self.limit(caller)
            ctx = Ctx(rid, env, caller, source)
            if (
                caller.cert_run_id
                and self.certs is not None
                and rctx.started < caller.cert_run_ends
                and not request.path.startswith(RUN_ROUTES)
            ):
                return await under_run(self, self.certs, request, handler, ctx, traveller, params, kind)
            if request.method == "POST":
                return await self._idempotent(request, handler, ctx, traveller, params, kind)
            if request.body:
                ctx.body = self._parse_body(request)
            if traveller != "none":
                await self._traveller(request, ctx, traveller)
            if request.headers.get(SANDBOX_TRIGGER) is not None:  # decide() has nothing to say without
                await self._trigger(request, ctx, kind)
            response = handler(request, ctx, **params)
            if not isinstance(response, HTTPResponse):
                response = await response
            return self.finish(response, ctx, request)
        finally:
            request_id_var.reset(token)

    def finish(
        self, response: HTTPResponse, ctx: Ctx, request: BareRequest, error_type: str = ""
    ) -> HTTPResponse:
        """The answer of an admitted request: its headers, counted, and filed in the request log. A refusal
        raised instead is answered (and filed) by edge.app.handle_error."""
        if error_type:  # error_response's answer has it already
            response.headers[X_REQUEST_ID] = ctx.request_id
        else:  # a handler's answer never has it (gate.finish adds it): no search for one to replace
            response.headers.add(X_REQUEST_ID, ctx.request_id)
        caller = ctx.caller
        for name, value in caller.headers:
            response.headers[name] = value
        status = response.status
        counted = RESPONSES_BY_STATUS.get(status)  # count_response inlined
        if counted is None:
            count_response(status)
        else:
            counted.value += 1
        rctx = request.ctx
        started = rctx.started
        answered = time.time()
        route = rctx.route or request.route.path  # type: ignore[union-attr]  # routed: it has one
        # edge.metrics.route_latency inlined, as the request log's record below.
        child = ROUTE_LATENCY[caller.environment].get(route)
        if child is None:
            child = route_latency(route, caller.environment)
        latency = answered - started
        child.counts[bisect_left(LATENCY_BOUNDS, latency)] += 1  # LoopTimes.observe inlined
        child.sum += latency
        usage = self.usage
        if usage is not None:  # UsageCounter.count inlined: a look-up and three additions, no string
            cells = usage.cells
            cell_key = (
                caller.account_id,
                caller.environment,
                caller.key_id,
                request.method,
                route,
                status,
                error_type or ctx.error_type,
                int(started) // 60,
            )
            cell = cells.get(cell_key)
            if cell is None:
                cell = cells[cell_key] = new_cell()
            cell[0] += 1
            cell[1] += latency
            cell[2 + bisect_left(LATENCY_BOUNDS_S, latency)] += 1
        requests = self.requests
        if requests is not None and (
            # A certification run's key: every request (its checks' evidence links here), not a sample.
            (caller.cert_run_id and started < caller.cert_run_ends)
            or (
                requests.files_error(caller.account_id, answered)
                if status >= 400
                else ctx.audited
                or (
                    started >= requests.successes_full_until
                    and requests.files_success(started, caller.account_id)
                )
            )
        ):
            # RequestLog.record inlined (the request path: a method call cost as much as the append).
            buffer = requests.buffer
            if not buffer:
                requests.first_record()
            elif len(buffer) >= requests.batch:
                requests.crowded()
            buffer.append(
                (
                    started,
                    answered,
                    caller,
                    request.method,
                    request.path,
                    status,
                    error_type or ctx.error_type,
                    ctx.request_id,
                )
            )
        return response

    def _parse_body(self, request: BareRequest) -> dict[str, Any]:
        check_json_content_type(request.headers.get("content-type"))
        try:
            body = parse_json(request.body)
        except JsonProblem as exc:
            raise EdgeError(f"the request body is refused: {exc.message}", type="invalid_request") from None
        if not isinstance(body, dict):
            raise EdgeError("the request body must be a JSON object", type="invalid_request")
        return body

    async def _traveller(self, request: BareRequest, ctx: Ctx, mode: str) -> None:
        if mode == "none":
            return
        raw = request.headers.get("x-partner-customer-ref")
        if raw is None:
            if mode == "required":
                raise EdgeError(
                    "this route needs the X-Partner-Customer-Ref header", type="invalid_customer_ref"
                )
            return
        ref = check_customer_ref(raw)
        resp = await self.authorizer.auth.resolve_traveller(
            auth_pb2.ResolveTravellerRequest(
                account_id=ctx.caller.account_id,
                environment=AUTH_ENVIRONMENT.pb(ctx.environment),
                partner_ref=ref,
            )
        )
        ctx.customer_ref = ref
        ctx.traveller_id = resp.traveller_id

    async def _trigger(self, request: BareRequest, ctx: Ctx, kind: RouteKind) -> None:
        decision = decide(
            request.headers.get("x-sandbox-trigger"), ctx.environment, kind, ctx.caller.account_mode
        )
        if decision.refusal:
            raise EdgeError(decision.refusal, type="invalid_request")
        trigger = decision.trigger
        if trigger is None:
            return
        log.info("sandbox trigger", extra={"trigger": trigger.name, "path": request.path})
        SANDBOX_TRIGGERS.labels(trigger.name).inc()
        if trigger.warn_event and self.publisher is not None:
            caller = ctx.caller
            if trigger.warn_event == "search_quota.threshold":
                data = quota_threshold(caller.daily_search_allowance, utcnow().date())
            else:
                data = low_balance()
            await self.publisher.publish(
                caller.account_id,
                ctx.environment,
                trigger.warn_event,
                STATES[trigger.warn_event],
                data,
                key=f"trigger:{ctx.request_id}",
                request_id=ctx.request_id,
            )
        if trigger.error_type == "rate_limited":
            raise RateLimited(1, FORCED_MESSAGES["rate_limited"])
        if trigger.error_type:
            raise EdgeError(FORCED_MESSAGES[trigger.error_type], type=trigger.error_type)
        ctx.trigger = trigger

    async def _idempotent(
        self,
        request: BareRequest,
        handler: Handler,
        ctx: Ctx,
        traveller: str,
        params: dict[str, Any],
        kind: RouteKind,
    ) -> HTTPResponse:
        key = ctx.idempotency_key = check_idempotency_key(request.headers.get("idempotency-key"))
        body_bytes = request.body or b""
        if body_bytes:
            ctx.body = self._parse_body(request)
        caller = ctx.caller
        env = ctx.environment.value
        fingerprint = request_hash(
            request.method, request.path, body_bytes, fingerprint_headers(request.headers)
        )
        stored = await self.store.claim(caller.account_id, env, key, fingerprint, _now())
        if stored is not None:
            replay = EdgeResponse(stored.body, status=stored.status, headers=stored.headers)
            replay.headers["Idempotent-Replayed"] = "true"
            return self.finish(replay, ctx, request)
        error_type = ""
        try:
            try:
                await self._traveller(request, ctx, traveller)
                await self._trigger(request, ctx, kind)
                answer = handler(request, ctx, **params)
                response = answer if isinstance(answer, HTTPResponse) else await answer
            except (EdgeError, ClientError) as caught:
                exc = edge_error(caught) if isinstance(caught, ClientError) else caught
                retry = (("Retry-After", str(exc.retry_after)),) if isinstance(exc, RateLimited) else ()
                docs = self.docs.base(request.scheme, request.headers.get("host"))
                response = error_response(exc.type, exc.message, ctx.request_id, docs, retry)
                error_type = exc.type
        except BaseException:
            await self.store.release(caller.account_id, env, key)
            raise
        if response.status >= 500:
            await self.store.release(caller.account_id, env, key)
        else:
            raw = response.body if isinstance(response.body, bytes) else str(response.body or "").encode()
            try:
                await self.store.complete(
                    caller.account_id,
                    env,
                    key,
                    response.status,
                    raw.decode("utf-8", errors="replace"),
                    _stored_headers(response),
                )
            except Exception:
                # The request ran; failing to record it must not leave the key claimed.
                log.exception("could not store the idempotent response")
                await self.store.release(caller.account_id, env, key)
        return self.finish(response, ctx, request, error_type)


def admitted(request: BareRequest, answer: Answer) -> Caller:
    """The caller of an allowed answer; a refusal is raised. The caller is also kept on ``request.ctx``
    when known, refusals included: Deprecation/Sunset also go on the refusals a rotated-out key gets."""
    caller = answer.caller
    if caller is not None:
        request.ctx.caller = caller
    if not answer.allowed or caller is None:
        raise EdgeError(
            answer.error_message or "the API key was refused", type=answer.error_type or "invalid_api_key"
        )
    return caller


def _stored_headers(response: HTTPResponse) -> dict[str, str]:
    headers = {"Content-Type": response.content_type or "application/json"}
    retry_after = response.headers.get("Retry-After")
    if retry_after:
        headers["Retry-After"] = retry_after
    return headers


def _now() -> float:
    import time

    return time.time()


def guarded(
    scope: str, *, write: bool | None = None, traveller: str = "none", csv: bool = False
) -> Callable[[Handler], Callable[..., Awaitable[HTTPResponse]]]:
    """Wrap a handler ``(request, ctx, **params)`` with the gate for a route requiring ``scope``. ``csv``:
    the route also answers text/csv, when the Accept header asks for it (``request.ctx.csv``)."""

    def decorate(handler: Handler) -> Callable[..., Awaitable[HTTPResponse]]:
        is_write = scope.endswith(":write") if write is None else write

        def route(request: BareRequest, **params: Any) -> Awaitable[HTTPResponse]:
            if csv and prefers_csv(request.headers.get(ACCEPT)):
                request.ctx.csv = True
            # The gate's coroutine itself, not one awaiting it: Sanic awaits what a handler returns.
            gate: Gate = request.app.ctx.gate
            return gate.run(request, handler, scope, is_write, traveller, params)

        route.__name__ = handler.__name__
        route.__doc__ = handler.__doc__
        return route

    return decorate
