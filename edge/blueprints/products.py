"""Product routes (hotels, flights, esim) from the route table, proxied to the environment's upstream."""

from __future__ import annotations

import asyncio
import functools

import httpx
from sanic import Blueprint
from sanic.response import HTTPResponse

from edge.context import EdgeRequest
from edge.environments import Environment
from edge.exceptions import EdgeError, UpstreamUnavailable
from edge.gate import Ctx
from edge.responses import EdgeResponse
from edge.routetable import ProductRoute, path_problem
from svckit.prototables import AUTH_ENVIRONMENT
from travel.auth.v1 import auth_pb2

bp = Blueprint("products")
ALL_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]
# Headers passed upstream from the partner's request; never Authorization.
PASS_HEADERS = ("content-type", "accept-language")


async def proxy(route: ProductRoute, request: EdgeRequest, ctx: Ctx, **params: str) -> HTTPResponse:
    app_ctx = request.app.ctx
    caller = ctx.caller
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
    if ctx.trigger is not None:
        # A sandbox upstream of its own decides what a failure trigger means there.
        headers_trigger = {"X-Sandbox-Trigger": ctx.trigger.name}
    else:
        headers_trigger = {}
    url = route.upstream[ctx.environment] + request.path
    if request.query_string:
        url += "?" + request.query_string
    headers = {
        "Accept": "application/json",
        "Accept-Encoding": "identity",  # the body is passed on as received
        "X-Request-Id": ctx.request_id,
        "X-Account-Id": caller.account_id,
        "X-Key-Id": caller.key_id,
        "X-Environment": ctx.environment.value,
        **headers_trigger,
    }
    if ctx.traveller_id:
        headers["X-Traveller-Id"] = ctx.traveller_id
    if ctx.idempotency_key:
        # The upstream deduplicates on it (scoped by X-Account-Id and X-Environment): a request the edge
        # re-runs after dying before it stored the answer does not book twice.
        headers["Idempotency-Key"] = ctx.idempotency_key
    for name in PASS_HEADERS:
        value = request.headers.get(name)
        if value:
            headers[name.title()] = value
    # Straight to the transport: httpx's client would add a cookie jar shared by every partner's
    # requests, redirects and auth, none of which a proxy wants.
    upstream = app_ctx.http
    outgoing = httpx.Request(request.method, url, content=request.body or None, headers=headers)
    try:
        async with asyncio.timeout(app_ctx.config.upstream_timeout):
            resp = await upstream.handle_async_request(outgoing)
            await resp.aread()
    except (httpx.HTTPError, TimeoutError) as exc:
        raise UpstreamUnavailable(
            f"the {route.scope.split(':')[0]} service cannot be reached; retry later"
        ) from exc
    return EdgeResponse(
        resp.content,
        status=resp.status_code,
        content_type=resp.headers.get("content-type", "application/json"),
    )


async def product_route(request: EdgeRequest, rest: str) -> HTTPResponse:
    app_ctx = request.app.ctx
    gate = app_ctx.gate
    gate.request_id(request)
    gate.hosts.environment(request.headers.get("host"))
    problem = path_problem(request.path)
    if problem:
        raise EdgeError(
            f"the request path contains {problem}; send the path without it", type="invalid_request"
        )
    match = app_ctx.config.routes.match(request.method, request.path)
    if match is None:
        raise EdgeError(f"no route {request.method} {request.path}", type="not_found")
    route, params = match
    return await gate.run(
        request,
        functools.partial(proxy, route),
        route.scope,
        route.is_write,
        route.traveller,
        params,
        route.kind,
    )


# Registered by call: Sanic's route decorator is untyped (it would make the handler untyped too).
bp.add_route(product_route, "/v1/<rest:path>", methods=ALL_METHODS, name="product_route")
