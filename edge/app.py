"""create_app(config): the Sanic application of the edge.

The clients of authsvc and webhookd (``app.ctx.auth``: svckit.clients.AuthClient, ``app.ctx.hooks``:
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
from typing import Any

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

from edge.authcache import AuthCache
from edge.authorizer import Authorizer
from edge.blueprints import account, docs, events, products, sandbox, stream, webhooks
from edge.config import EdgeConfig
from edge.exceptions import EdgeError, RateLimited, edge_error
from edge.gate import Gate
from edge.idempotency import SqlIdempotencyStore
from edge.metrics import REFUSALS, count_response
from edge.publisher import Publisher
from edge.responses import error_response, new_request_id
from edge.simulator import Simulator
from svckit.clients import AuthClient, ClientError, HooksClient
from svckit.db import create_engine
from svckit.errors import ServiceError
from svckit.http import PooledTransport, system_addresses
from svckit.logs import request_id_var
from svckit.secretbox import SecretBox

log = logging.getLogger(__name__)
_names = itertools.count()

GRPC_OPTIONS = [
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2_000),
]


def _classify(request: Request | None, exc: BaseException) -> tuple[str, str]:
    if isinstance(exc, ClientError):
        exc = edge_error(exc)
    if isinstance(exc, ServiceError):
        return exc.type, exc.message
    if isinstance(exc, NotFound | MethodNotAllowed):
        if request is not None:
            try:
                request.app.ctx.gate.hosts.environment(request.headers.get("host"))
            except EdgeError as host_error:
                return host_error.type, host_error.message
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


def handle_error(request: Request | None, exc: BaseException) -> HTTPResponse:
    etype, message = _classify(request, exc)
    rid = new_request_id()
    headers: tuple[tuple[str, str], ...] = ()
    if request is not None:
        rid = getattr(request.ctx, "rid", None) or rid
        caller = getattr(request.ctx, "caller", None)
        if caller is not None:
            headers = caller.headers
    if isinstance(exc, RateLimited):
        headers = (*headers, ("Retry-After", str(exc.retry_after)))
    token = request_id_var.set(rid)
    try:
        if etype == "internal_error":
            log.error("unhandled error", exc_info=exc)
        else:
            log.info("refused", extra={"type": etype, "path": request.path if request else ""})
    finally:
        request_id_var.reset(token)
    REFUSALS.labels(etype).inc()
    docs_base = request.app.ctx.config.docs_base if request is not None else EdgeConfig.docs_base
    response = error_response(etype, message, rid, docs_base, headers)
    count_response(response.status)
    return response


def create_app(config: EdgeConfig) -> Sanic:
    app = Sanic(f"{config.name}_{next(_names)}", configure_logging=False)
    app.config.ACCESS_LOG = False
    app.config.REQUEST_MAX_SIZE = config.max_body_bytes
    # Sanic types these as int; fractions of a second work (and let tests use short ones).
    app.config.update(KEEP_ALIVE_TIMEOUT=config.keep_alive_timeout, REQUEST_TIMEOUT=config.header_timeout)
    app.config.NOISY_EXCEPTIONS = False
    app.config.FALLBACK_ERROR_FORMAT = "json"
    app.ctx.config = config
    app.ctx.usage_cache = {}
    app.ctx.usage_inflight = {}
    app.ctx.account_bodies = {}
    app.ctx.streams = set()
    for bp in (account.bp, webhooks.bp, events.bp, sandbox.bp, stream.bp, docs.bp, products.bp):
        app.blueprint(bp)
    app.error_handler.add(Exception, handle_error)

    @app.before_server_start
    async def open_resources(app: Sanic) -> None:
        cfg: EdgeConfig = app.ctx.config
        auth = app.ctx.auth = AuthClient(
            cfg.authsvc, cfg.tls, timeout=cfg.authsvc_timeout, options=GRPC_OPTIONS
        )
        hooks = app.ctx.hooks = HooksClient(
            cfg.webhookd, cfg.tls, timeout=cfg.webhookd_timeout, options=GRPC_OPTIONS
        )
        app.ctx.authorizer = Authorizer(auth, cache=AuthCache(max_denials=cfg.denial_cache_size))
        app.ctx.engine = create_engine(cfg.database)
        app.ctx.store = SqlIdempotencyStore(app.ctx.engine, SecretBox(cfg.idempotency_key))
        if cfg.idempotency_key is None:
            log.warning(
                "no --idempotency-key-file / EDGE_IDEMPOTENCY_KEY: stored responses holding a secret are "
                "sealed with a key of this process only (a retry elsewhere runs again, deduplicated "
                "downstream)"
            )
        await app.ctx.store.migrate()
        # The product upstreams' transport: httpx's own pool cost a proxied GET 1.25 ms of CPU (svckit.http).
        app.ctx.http = cfg.upstream_transport or PooledTransport(
            system_addresses, max_body=cfg.upstream_max_body, refuse_longer=True
        )
        app.ctx.publisher = Publisher(hooks)
        app.ctx.gate = Gate(cfg, app.ctx.authorizer, app.ctx.store, app.ctx.publisher)
        app.ctx.simulator = Simulator(app.ctx.publisher, cfg.sandbox_confirm_seconds)
        app.ctx.tasks = [
            asyncio.ensure_future(app.ctx.authorizer.watch_forever()),
            asyncio.ensure_future(_purge_forever(app.ctx.store)),
        ]
        # Serve with a trusted cache from the first request when authsvc is up; fail closed otherwise.
        await app.ctx.authorizer.wait_synced(2.0)

    @app.before_server_stop
    async def close_streams(app: Sanic) -> None:
        for session in list(getattr(app.ctx, "streams", ())):
            session.finish(1001, "server shutting down")
        simulator = getattr(app.ctx, "simulator", None)
        if simulator is not None:
            await simulator.drain(app.ctx.config.sandbox_confirm_seconds + app.ctx.config.webhookd_timeout)

    @app.after_server_stop
    async def close_resources(app: Sanic) -> None:
        for task in getattr(app.ctx, "tasks", []):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        with contextlib.suppress(Exception):
            await app.ctx.http.aclose()
        with contextlib.suppress(Exception):
            await app.ctx.gate.aclose()
        for name in ("auth", "hooks"):
            client = getattr(app.ctx, name, None)
            if client is not None:
                await client.close()
        engine = getattr(app.ctx, "engine", None)
        if engine is not None:
            await engine.dispose()

    return app


async def _purge_forever(store: Any) -> None:
    while True:
        try:
            removed = await store.purge(time.time())
            if removed:
                log.info("purged idempotency records", extra={"count": removed})
        except Exception:
            log.exception("idempotency purge failed")
        await asyncio.sleep(600)
