"""GET /v1/account (account:read) and DELETE /v1/customers/{ref} (account:write)."""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import json
import time
from collections.abc import Awaitable
from typing import Any
from urllib.parse import unquote

from sanic import Blueprint
from sanic.response import HTTPResponse

from edge.context import EdgeContext, EdgeRequest
from edge.convert import iso
from edge.environments import Environment
from edge.gate import Ctx, guarded
from edge.negotiation import check_customer_ref
from edge.responses import EdgeResponse, json_response
from svckit.prototables import AUTH_ENVIRONMENT
from travel.auth.v1 import auth_pb2

bp = Blueprint("account")


async def _fetch_usage(request: EdgeRequest, ctx: Ctx) -> dict[str, Any]:
    app_ctx = request.app.ctx
    resp = await app_ctx.auth.get_usage(auth_pb2.GetUsageRequest(account_id=ctx.caller.account_id))
    u = resp.usage
    usage = {
        "date": u.date,
        "searchesUsed": u.searches_used,
        "dailySearchAllowance": u.daily_search_allowance,
        "remaining": u.remaining,
    }
    cache = app_ctx.usage_cache
    cache[ctx.caller.account_id] = (time.monotonic() + app_ctx.config.usage_cache_seconds, usage)
    return usage


async def usage_of(request: EdgeRequest, ctx: Ctx) -> dict[str, Any]:
    """Today's search usage, cached per account for usage_cache_seconds: at most one GetUsage per
    account per period, however many requests arrive (one fetch in flight, the others wait for it).
    A search through this edge drops the account's entry, so its own searches show at once."""
    account_id = ctx.caller.account_id
    app_ctx = request.app.ctx
    hit = app_ctx.usage_cache.get(account_id)
    if hit is not None and hit[0] > time.monotonic():
        return hit[1]
    inflight = app_ctx.usage_inflight
    pending = inflight.get(account_id)
    if pending is None:
        pending = inflight[account_id] = asyncio.ensure_future(_fetch_usage(request, ctx))
        pending.add_done_callback(lambda _t: inflight.pop(account_id, None))
    return await asyncio.shield(pending)


@functools.lru_cache(maxsize=2)
def sandbox_usage_on(day: int) -> dict[str, Any]:
    """``sandbox_usage`` of a UTC day given as days since the epoch (what ``time.time() // 86400`` is):
    no datetime built per request."""
    return sandbox_usage((dt.date(1970, 1, 1) + dt.timedelta(days=day)).isoformat())


@functools.lru_cache(maxsize=2)
def sandbox_usage(date: str) -> dict[str, Any]:
    """The sandbox's own usage figures: its searches are free and never counted, so none are used and no
    allowance applies. The account's live figures are live data, which a test key never sees
    (decisions.md "Environments"); one object per day, so the serialised body can be reused."""
    return {"date": date, "searchesUsed": 0, "dailySearchAllowance": None, "remaining": None}


def account_body(ctx: Ctx, usage: dict[str, Any]) -> bytes:
    c = ctx.caller
    return json.dumps(
        {
            "object": "account",
            "id": c.account_id,
            "name": c.account_name,
            "mode": c.account_mode,
            "status": c.account_status,
            "environment": ctx.environment.value,
            "livemode": ctx.environment is Environment.LIVE,
            "key": {
                "id": c.key_id,
                "hint": c.key_hint,
                "scopes": list(c.scopes),
                "status": c.key_status,
                "expiresAt": iso(c.expires_at),
            },
            "usage": {**usage, "counted": ctx.environment is Environment.LIVE},
        },
        separators=(",", ":"),
    ).encode()


@bp.get("/v1/account")
@guarded("account:read")
def get_account(request: EdgeRequest, ctx: Ctx) -> HTTPResponse | Awaitable[HTTPResponse]:
    """Read own account."""
    app_ctx = request.app.ctx
    if ctx.environment is Environment.SANDBOX:
        usage = sandbox_usage_on(int(time.time() // 86_400))
    elif (hit_usage := app_ctx.usage_cache.get(ctx.caller.account_id)) and hit_usage[0] > time.monotonic():
        usage = hit_usage[1]  # the common case: answered without a coroutine (edge.gate.Handler)
    else:
        return _account_after_usage(request, ctx)
    # account_response inlined (the common case)
    bodies = app_ctx.account_bodies
    hit = bodies.get(ctx.caller.key_id)
    if hit is not None and hit[0] is ctx.caller and hit[1] is usage:
        return EdgeResponse(hit[2], content_type="application/json")
    return account_response(app_ctx, ctx, usage)


async def _account_after_usage(request: EdgeRequest, ctx: Ctx) -> HTTPResponse:
    return account_response(request.app.ctx, ctx, await usage_of(request, ctx))


def account_response(app_ctx: EdgeContext, ctx: Ctx, usage: dict[str, Any]) -> HTTPResponse:
    """GET /v1/account's answer of the caller and the usage figures.

    The body only changes with the cached authorisation (caller) or the cached usage figure: reuse
    its serialisation while both are the same objects."""
    bodies = app_ctx.account_bodies
    slot = ctx.caller.key_id
    hit = bodies.get(slot)
    if hit is not None and hit[0] is ctx.caller and hit[1] is usage:
        body = hit[2]
    else:
        body = account_body(ctx, usage)
        bodies[slot] = (ctx.caller, usage, body)
    return EdgeResponse(body, content_type="application/json")


@bp.delete("/v1/customers/<ref:str>")
@guarded("account:write")
async def delete_customer(request: EdgeRequest, ctx: Ctx, ref: str) -> HTTPResponse:
    """Remove the traveller record of a partner reference."""
    ref = check_customer_ref(unquote(ref), source="the path parameter {ref}")
    resp = await request.app.ctx.auth.delete_traveller(
        auth_pb2.DeleteTravellerRequest(
            account_id=ctx.caller.account_id,
            environment=AUTH_ENVIRONMENT.pb(ctx.environment),
            partner_ref=ref,
        )
    )
    return json_response(
        {"object": "customer", "ref": ref, "travellerId": resp.traveller_id, "deleted": True}
    )
