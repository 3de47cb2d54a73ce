"""create_app(config): the Sanic application of the edge.

The app's context is an ``edge.context.EdgeContext`` (``EdgeApp``), its requests ``EdgeRequest``s. The
clients of authsvc and webhookd (``app.ctx.auth``: svckit.clients.AuthClient, ``app.ctx.hooks``:
HooksClient), the idempotency database and the upstream HTTP client are opened in ``before_server_start``
onto ``app.ctx`` and closed in ``after_server_stop``. A peer's error a handler lets through
(svckit.clients.ClientError) is answered as ``edge.exceptions.edge_error`` makes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import Awaitable, Coroutine
from pathlib import Path
from typing import Any, cast

from sanic import Request, Sanic
from sanic.exceptions import (
    BadRequest,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    RequestTimeout,
    SanicException,
)
from sanic.response import HTTPResponse
from sqlalchemy.ext.asyncio import AsyncEngine

from edge.authcache import AuthCache
from edge.authorizer import Authorizer
from edge.blueprints import (
    account,
    catalog,
    clock,
    docs,
    events,
    health,
    keys_self,
    leaks,
    polling,
    products,
    sandbox,
    stream,
    webhooks,
)
from edge.blueprints import certification as certification_routes
from edge.blueprints import ledger as ledger_routes
from edge.blueprints import usage as usage_routes
from edge.certification import CertRecorder
from edge.config import EdgeConfig
from edge.context import EdgeApp, EdgeContext, EdgeRequest
from edge.docurls import DOCS_PATH
from edge.exceptions import EdgeError, RateLimited, WrongMethod, edge_error, outage_error
from edge.gate import Gate
from edge.idempotency import SqlIdempotencyStore
from edge.methods import allowed_methods
from edge.metrics import REFUSALS, count_response, route_latency
from edge.publisher import Publisher
from edge.requestlog import RequestLog
from edge.responses import error_response, new_request_id
from edge.sanicconfig import EdgeSanicConfig
from edge.simulator import Simulator
from edge.unknownkeys import UnknownKeyBudget
from edge.upstream import upstream_transport
from edge.usagecounts import UsageCounter, method_word
from svckit.apikeys import configure_prefixes
from svckit.clients import AuthClient, ClientError, HooksClient
from svckit.connguard import refused as connection_refused
from svckit.db import create_engine
from svckit.errors import ServiceError
from svckit.logs import request_id_var
from svckit.readiness import watch_database
from svckit.refusallog import RefusalLog
from svckit.secretbox import SecretBox

log = logging.getLogger(__name__)
REFUSAL_LOG = RefusalLog(log)
_names = itertools.count()

GRPC_OPTIONS = [
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2_000),
]


def _classify(request: EdgeRequest | None, exc: BaseException) -> tuple[str, str]:
    if isinstance(exc, ClientError):
        exc = edge_error(exc)
    elif not isinstance(exc, ServiceError | SanicException):
        exc = outage_error(exc) or exc  # the idempotency database down: 503, never a 500
    if isinstance(exc, ServiceError):
        return exc.type, exc.message
    if isinstance(exc, NotFound | MethodNotAllowed):
        if request is not None:
            try:
                request.app.ctx.gate.hosts.environment(request.headers.get("host"))
            except EdgeError as host_error:
                return host_error.type, host_error.message
            wrong = _wrong_method(request)
            if wrong is not None:
                return wrong.type, wrong.message
            return "not_found", f"no route {request.method} {request.path}"
        return "not_found", "no such route"
    if isinstance(exc, PayloadTooLarge):
        limit = request.app.ctx.config.max_body_bytes if request is not None else 0
        return "payload_too_large", f"the request body is larger than the limit of {limit} bytes"
    if isinstance(exc, RequestTimeout):
        return "request_timeout", "the request head did not arrive in time"
    if isinstance(exc, BadRequest):
        return "invalid_request", f"malformed request: {exc}"
    if isinstance(exc, SanicException) and exc.status_code < 500:
        return "invalid_request", str(exc) or "malformed request"
    return "internal_error", "internal error; the request id identifies it in our logs"


def _wrong_method(request: EdgeRequest) -> WrongMethod | None:
    """405 for a path some route answers with other methods (edge.methods), else None (404)."""
    allowed = allowed_methods(request.app.router, request.app.ctx.config.routes, request.path)
    return WrongMethod(request.method, request.path, allowed) if allowed else None


def handle_error(
    request: EdgeRequest | None, exc: BaseException
) -> HTTPResponse | Coroutine[Any, Any, HTTPResponse]:
    etype, message = _classify(request, exc)
    rid = new_request_id()
    headers: tuple[tuple[str, str], ...] = ()
    if request is not None:
        rctx = request.ctx
        rid = rctx.rid or rid
        caller = rctx.caller
        if caller is not None:
            headers = caller.headers
    if isinstance(exc, RateLimited):
        headers = (*headers, ("Retry-After", str(exc.retry_after)))
    if etype == "method_not_allowed" and request is not None:
        wrong = exc if isinstance(exc, WrongMethod) else _wrong_method(request)
        if wrong is not None:
            headers = (*headers, ("Allow", ", ".join(wrong.allowed)))
    token = request_id_var.set(rid)
    try:
        if etype == "internal_error":
            log.error("unhandled error", exc_info=exc)
        else:
            # Counted by type, at most a line a second (svckit.refusallog): a flood of refusals is no
            # flood of log lines. REFUSALS and edge_http_responses_total still count each one.
            REFUSAL_LOG.add(etype)
    finally:
        request_id_var.reset(token)
    REFUSALS.labels(etype).inc()
    gate: Gate | None = getattr(request.app.ctx, "gate", None) if request is not None else None
    if gate is not None and request is not None:
        docs_base = gate.docs.base(request.scheme, request.headers.get("host"))
    else:  # no request, or the app did not start: the docs' path on whatever host this is
        docs_base = DOCS_PATH
    response = error_response(etype, message, rid, docs_base, headers)
    count_response(response.status)
    if gate is not None and request is not None:
        _observe_refusal(gate, request)
    # The request log: a refusal of a known key (missing_scope, rate_limited, ...) is filed under its
    # account; one with no valid key has no account and is not (edge.requestlog).
    if gate is not None and request is not None and gate.requests is not None:
        rctx = request.ctx
        if rctx.caller is not None:
            gate.requests.record(
                rctx.started, rctx.caller, request.method, request.path, response.status, etype, rid
            )
    if gate is not None and request is not None and gate.usage is not None:
        _count_refusal(gate, gate.usage, request, response.status, etype)
    if gate is not None and request is not None:
        # An anonymous connection ends with its first refusal (svckit.connlimits.close_after).
        connection_refused(request, response.status, request.ctx.caller is not None)
        # Past its source's allowance a refusal is written later (svckit.pacing): a flood slowed.
        wait = gate.pace(request, response.status, request.ctx.caller is not None)
        if wait is not None:
            return _after(wait, response)
    return response


async def _after(wait: Awaitable[None], response: HTTPResponse) -> HTTPResponse:
    await wait
    return response


def _observe_refusal(gate: Gate, request: EdgeRequest) -> None:
    """A refusal's latency by route and environment (edge.metrics.REQUEST_SECONDS), when the gate took
    the request (it has a start time) and its environment is known."""
    rctx = request.ctx
    if not rctx.started or request.route is None:
        return
    if rctx.caller is not None:
        environment = rctx.caller.environment
    else:
        try:
            environment = gate.hosts.environment(request.headers.get("host")).value
        except EdgeError:
            return
    route_latency(rctx.route or request.route.path, environment).observe(time.time() - rctx.started)


def _count_refusal(gate: Gate, usage: UsageCounter, request: EdgeRequest, status: int, etype: str) -> None:
    """A refusal in the usage counts (edge.usagecounts): under its key when one was accepted; else with no
    account or key, the environment its host names (none for another host), the route it matched."""
    rctx = request.ctx
    now = time.time()
    started = rctx.started or now
    route = rctx.route or (request.route.path if request.route is not None else "")
    caller = rctx.caller
    if caller is not None:
        account_id, environment, key_id = caller.account_id, caller.environment, caller.key_id
    else:
        account_id = key_id = ""
        try:
            environment = gate.hosts.environment(request.headers.get("host")).value
        except EdgeError:
            environment = ""
    method = method_word(request.method)  # a client's made-up methods are one cell, not one each
    usage.count(account_id, environment, key_id, method, route, status, etype, started, now - started)


def create_app(config: EdgeConfig) -> EdgeApp:
    # Sanic types request_class as its default Request; EdgeRequest is that with typed contexts.
    app: EdgeApp = Sanic(
        f"{config.name}_{next(_names)}",
        # Sanic's settings, those its HTTP path reads per request as properties (edge.sanicconfig).
        config=EdgeSanicConfig(),
        ctx=EdgeContext(config),
        request_class=cast(type[Request], EdgeRequest),
        configure_logging=False,
    )
    app.config.ACCESS_LOG = False
    app.config.REQUEST_MAX_SIZE = config.max_body_bytes
    # Sanic types these as int; fractions of a second work (and let tests use short ones).
    app.config.update(KEEP_ALIVE_TIMEOUT=config.keep_alive_timeout, REQUEST_TIMEOUT=config.header_timeout)
    app.config.NOISY_EXCEPTIONS = False
    app.config.FALLBACK_ERROR_FORMAT = "json"
    for bp in (account.bp, webhooks.bp, events.bp, catalog.bp, sandbox.bp, stream.bp, docs.bp, products.bp):
        app.blueprint(bp)
    app.blueprint(ledger_routes.bp)  # GET /v1/ledger
    app.blueprint(clock.bp)
    app.blueprint(health.bp)  # GET /healthz, /readyz
    configure_prefixes(config.key_prefixes)  # the malformed-key refusal's brands (svckit.apikeys)
    app.blueprint(leaks.blueprint(config.secret_scanning))  # secret scanning (GitHub, GitLab)
    app.blueprint(keys_self.bp)  # GET/DELETE /v1/keys/self
    app.blueprint(polling.bp)  # GET .../poll, POST .../poll/commit (a polling endpoint's consumers)
    app.blueprint(usage_routes.bp)  # GET /v1/usage, /v1/usage/webhooks
    app.blueprint(certification_routes.bp)  # /v1/certification/runs, /v1/certification/keys
    app.error_handler.add(Exception, handle_error)

    @app.before_server_start
    async def open_resources(app: EdgeApp) -> None:
        ctx = app.ctx
        cfg = ctx.config
        auth = ctx.auth = AuthClient(cfg.authsvc, cfg.tls, timeout=cfg.authsvc_timeout, options=GRPC_OPTIONS)
        hooks = ctx.hooks = HooksClient(
            cfg.webhookd, cfg.tls, timeout=cfg.webhookd_timeout, options=GRPC_OPTIONS
        )
        authorizer = ctx.authorizer = Authorizer(
            auth,
            cache=AuthCache(max_denials=cfg.denial_cache_size),
            unknown_keys=UnknownKeyBudget(cfg.unknown_key_rate, cfg.unknown_key_burst),
        )
        ctx.engine = create_engine(cfg.database)
        store = ctx.store = SqlIdempotencyStore(ctx.engine, SecretBox(cfg.idempotency_key))
        if cfg.idempotency_key is None:
            log.warning(
                "no --idempotency-key-file / EDGE_IDEMPOTENCY_KEY: stored responses holding a secret are "
                "sealed with a key of this process only (a retry elsewhere runs again, deduplicated "
                "downstream)"
            )
        await store.migrate()
        if not (Path(cfg.docs_dir) / "errors.md").is_file():
            log.warning(
                "no partner docs in --docs-dir / EDGE_DOCS_DIR: /docs pages answer 404, so does every "
                "error's default docUrl",
                extra={"docs_dir": cfg.docs_dir},
            )
        # The product upstreams' transport: httpx's own pool cost a proxied GET 1.25 ms of CPU (svckit.http).
        # Over mutual TLS with the edge's certificate unless --insecure-dev (edge.upstream).
        ctx.http = cfg.upstream_transport or upstream_transport(cfg.tls, cfg.upstream_max_body)
        publisher = ctx.publisher = Publisher(hooks)
        gate = ctx.gate = Gate(cfg, authorizer, store, publisher)
        requests = ctx.requests = gate.requests = RequestLog(
            auth, successes_per_second=cfg.request_log_successes
        )
        requests.start()
        if cfg.usage_counts:  # exact usage counts (edge.usagecounts), flushed to authsvc
            usage = ctx.usage = gate.usage = UsageCounter(auth, interval=cfg.usage_flush_interval)
            usage.start()
        certs = ctx.certs = gate.certs = CertRecorder(auth)
        certs.start()
        ctx.simulator = Simulator(publisher, cfg.sandbox_confirm_seconds)
        if gate.shared is not None:
            await gate.shared.start()  # edge_ratelimit_redis_up from a ping, before any request
        ctx.tasks = [
            asyncio.ensure_future(authorizer.watch_forever()),
            asyncio.ensure_future(_purge_forever(store)),
            # database_up from the first probe on (the idempotency database; svckit.readiness)
            asyncio.ensure_future(watch_database(ctx.engine)),
        ]
        # Serve with a trusted cache from the first request when authsvc is up; fail closed otherwise.
        await authorizer.wait_synced(2.0)

    @app.before_server_stop
    async def close_streams(app: EdgeApp) -> None:
        ctx = app.ctx
        for session in list(ctx.streams):
            session.finish(1001, "server shutting down")
        simulator: Simulator | None = getattr(ctx, "simulator", None)  # unset: the start failed
        if simulator is not None:
            await simulator.drain(ctx.config.sandbox_confirm_seconds + ctx.config.webhookd_timeout)

    @app.after_server_stop
    async def close_resources(app: EdgeApp) -> None:
        # What before_server_start opened; an attribute it did not get to is unset (getattr's None).
        ctx = app.ctx
        tasks: list[asyncio.Future[None]] = getattr(ctx, "tasks", [])
        for task in tasks:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        # The request log's last records, before the authsvc client closes (SIGTERM included).
        requests: RequestLog | None = getattr(ctx, "requests", None)
        if requests is not None:
            with contextlib.suppress(Exception):
                await requests.stop()
        # The usage counts since the last flush, likewise (a graceful stop loses none).
        usage: UsageCounter | None = getattr(ctx, "usage", None)
        if usage is not None:
            with contextlib.suppress(Exception):
                await usage.stop()
        certs: CertRecorder | None = getattr(ctx, "certs", None)
        if certs is not None:
            with contextlib.suppress(Exception):
                await certs.stop()
        with contextlib.suppress(Exception):
            await ctx.http.aclose()
        with contextlib.suppress(Exception):
            await ctx.gate.aclose()
        clients: tuple[AuthClient | HooksClient | None, ...] = (
            getattr(ctx, "auth", None),
            getattr(ctx, "hooks", None),
        )
        for client in clients:
            if client is not None:
                await client.close()
        engine: AsyncEngine | None = getattr(ctx, "engine", None)
        if engine is not None:
            await engine.dispose()

    return app


async def _purge_forever(store: Any) -> None:
    while True:
        try:
            removed = await store.purge(time.time())
            if removed:
                log.info("purged idempotency records", extra={"count": removed})
        except Exception as exc:
            if outage_error(exc) is None:  # an outage is counted and summarised, not a traceback
                log.exception("idempotency purge failed")
        await asyncio.sleep(600)
