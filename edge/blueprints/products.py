"""Product routes (hotels, flights, esim) from the route table, proxied to the environment's upstream."""

from __future__ import annotations

import asyncio
import functools

import httpx
from multidict import istr
from sanic import Blueprint
from sanic.response import HTTPResponse

from edge.context import EdgeRequest
from edge.environments import Environment
from edge.exceptions import EdgeError, UpstreamUnavailable, WrongMethod
from edge.gate import Ctx
from edge.methods import allowed_methods
from edge.responses import EdgeResponse, error_body, json_response
from edge.routetable import ProductRoute, path_problem
from edge.upstream import ASSERTION_HEADER, assertion
from edge.upstreamerrors import map_upstream_error
from svckit import tracing
from svckit.http import PooledTransport
from svckit.prototables import AUTH_ENVIRONMENT
from travel.auth.v1 import auth_pb2

bp = Blueprint("products")
ALL_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]
# Headers passed upstream from the partner's request; never Authorization.
PASS_HEADERS = (("content-type", "Content-Type"), ("accept-language", "Accept-Language"))
TRACEPARENT = istr(tracing.TRACEPARENT)
NEW_TRACE: dict[str, str] = {}  # a span's carrier without a traceparent: a new trace
# Upstream error types whose Retry-After is passed on.
RETRY_TYPES = frozenset({"rate_limited", "service_unavailable"})


async def proxy(route: ProductRoute, request: EdgeRequest, ctx: Ctx, **params: str) -> HTTPResponse:
    app_ctx = request.app.ctx
    caller = ctx.caller
    tracing.annotate(ctx.request_id)  # the id gate.run gave the request
    # The request's trace (the partner's own when it sent one) is bound to the caller's account: the events
    # published within it for this account continue it, none of another's (svckit.tracing).
    tracing.bind(caller.account_id)
    if route.search and ctx.environment is Environment.LIVE:
        await app_ctx.auth.consume_search(
            auth_pb2.ConsumeSearchRequest(
                account_id=caller.account_id,
                environment=AUTH_ENVIRONMENT.pb(ctx.environment),
                key_id=caller.key_id,
                count=1,
            )
        )
        app_ctx.usage_cache.pop(caller.account_id, None)
    # The upstream is chosen by the request's environment only: a sandbox request never reaches live.
    if route.builtin_action and ctx.environment is Environment.SANDBOX:
        return await app_ctx.simulator.answer(route, request, ctx, params)
    env = ctx.environment
    # Header names as sent upstream; the values are the edge's own or the partner's, checked by
    # edge.requesthead (no control character).
    headers = [
        ("Accept", "application/json"),
        ("Accept-Encoding", "identity"),  # the body is passed on as received
        ("X-Request-Id", ctx.request_id),
        ("X-Account-Id", caller.account_id),
        ("X-Key-Id", caller.key_id),
        ("X-Environment", env.value),
    ]
    if ctx.trigger is not None:
        # A sandbox upstream of its own decides what a failure trigger means there.
        headers.append(("X-Sandbox-Trigger", ctx.trigger.name))
    if ctx.traveller_id:
        headers.append(("X-Traveller-Id", ctx.traveller_id))
    if ctx.idempotency_key:
        # The upstream deduplicates on it (scoped by X-Account-Id and X-Environment): a request the edge
        # re-runs after dying before it stored the answer does not book twice.
        headers.append(("Idempotency-Key", ctx.idempotency_key))
    headers.append((tracing.TRACEPARENT, tracing.traceparent()))
    headers.append((tracing.TRACESTATE, tracing.tracestate()))
    signing = app_ctx.config.upstream_signing_key
    if signing is not None:  # for an upstream behind a proxy that ends TLS (edge.upstream)
        headers.append((ASSERTION_HEADER, assertion(signing, ctx, request.method, request.path)))
    request_headers = request.headers
    for name, title in PASS_HEADERS:
        value = request_headers.get(name)
        if value:
            headers.append((title, value))
    target = request.path
    query = request.query_string
    if query:
        target += "?" + query
    base = route.upstream[env]
    upstream = app_ctx.http
    timeout = app_ctx.config.upstream_timeout
    try:
        if isinstance(upstream, PooledTransport):
            # One formatted head, no httpx Request/Response objects, the deadline kept by the transport's
            # one sweep rather than a timer per request (svckit.http's fast path).
            status, raw, content = await upstream.request(
                request.method, base, target, headers, request.body or b"", answer_within=timeout
            )
            content_type = _content_type(raw)
        else:  # another httpx transport (EdgeConfig.upstream_transport)
            async with asyncio.timeout(timeout):
                outgoing = httpx.Request(
                    request.method, base + target, content=request.body or None, headers=headers
                )
                resp = await upstream.handle_async_request(outgoing)
                await resp.aread()
                status, content, raw = resp.status_code, resp.content, resp.headers.raw
                content_type = resp.headers.get("content-type", "application/json")
    except (httpx.HTTPError, TimeoutError) as exc:
        raise UpstreamUnavailable(
            f"the {route.scope.split(':')[0]} service cannot be reached; retry later"
        ) from exc
    if status < 400:  # a success (or redirect) body is the upstream's, untouched
        return EdgeResponse(content, status=status, content_type=content_type)
    return _mapped_error(route, request, ctx, status, content, raw)


def _mapped_error(
    route: ProductRoute,
    request: EdgeRequest,
    ctx: Ctx,
    status: int,
    content: bytes,
    raw: list[tuple[bytes, bytes]],
) -> HTTPResponse:
    """An upstream's error in the partner API's error shape (edge.upstreamerrors), its type kept on
    ``ctx`` for the request log; a 429 ``rate_limited`` or 503 ``service_unavailable`` keeps the
    upstream's ``Retry-After`` in seconds (a 429 without one gets 1, as the edge's own)."""
    mapped = map_upstream_error(status, content, route.scope.split(":")[0])
    ctx.error_type = mapped.type
    docs = request.app.ctx.gate.docs.base(request.scheme, request.headers.get("host"))
    body = error_body(mapped.type, mapped.message, ctx.request_id, docs)
    headers = None
    if mapped.type in RETRY_TYPES:
        retry = next((v for k, v in raw if k.lower() == b"retry-after"), b"")
        if retry.isdigit() and len(retry) <= 6:
            headers = {"Retry-After": retry.decode()}
        elif mapped.type == "rate_limited":
            headers = {"Retry-After": "1"}
    return json_response(body, status=mapped.status, headers=headers)


def _content_type(headers: list[tuple[bytes, bytes]]) -> str:
    for name, value in headers:
        if len(name) == 12 and name.lower() == b"content-type":
            return value.decode("latin-1")
    return "application/json"


async def product_route(request: EdgeRequest, rest: str) -> HTTPResponse:
    app_ctx = request.app.ctx
    gate = app_ctx.gate
    gate.request_id(request)
    gate.hosts.environment(request.headers.get("host"))
    path = request.path  # Sanic decodes it again on every read
    problem = path_problem(path)
    if problem:
        raise EdgeError(
            f"the request path contains {problem}; send the path without it", type="invalid_request"
        )
    match = app_ctx.config.routes.match(request.method, path)
    if match is None:
        allowed = allowed_methods(request.app.router, app_ctx.config.routes, path)
        if allowed:
            raise WrongMethod(request.method, path, allowed)
        raise EdgeError(f"no route {request.method} {path}", type="not_found")
    route, params = match
    request.ctx.route = route.path  # the latency histogram's route: the template, not the catch-all
    # A product request continues the partner's trace (its valid traceparent; never its tracestate) or
    # starts one, which authsvc, the upstream and webhookd's delivery of what it publishes continue
    # (svckit.tracing: with spans off, only the traceparent is made, no span).
    partner = request.headers.get(TRACEPARENT)
    handler = functools.partial(proxy, route)
    if tracing.tracer is None:  # spans off: the context alone, no context manager's calls
        token = tracing.continue_trace(partner)
        try:
            return await gate.run(
                request, handler, route.scope, route.is_write, route.traveller, params, route.kind
            )
        finally:
            tracing.end_trace(token)
    carrier = {tracing.TRACEPARENT: partner} if partner else NEW_TRACE
    with tracing.span(f"edge {route.method} {route.path}", carrier, kind="SERVER"):
        return await gate.run(
            request, handler, route.scope, route.is_write, route.traveller, params, route.kind
        )


# Registered by call: Sanic's route decorator is untyped (it would make the handler untyped too).
bp.add_route(product_route, "/v1/<rest:path>", methods=ALL_METHODS, name="product_route")
