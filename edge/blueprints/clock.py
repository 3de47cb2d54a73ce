"""POST /v1/sandbox/clock/advance: move the account's sandbox delivery schedule forward (sandbox only,
webhooks:write), Stripe's test clocks for webhooks.

``{"by": "2h"}`` (``30s``, ``5m``, ``1d``, ``1h30m``...; 1 s to 7 days: svckit.durations) makes every
sandbox delivery waiting for a later attempt due that much earlier, never earlier than now, so what would
have been sent by then is sent now: a partner sees the 1 m/5 m/30 m/2 h/6 h/24 h retries, the disable and
its e-mail in minutes. The retry after an attempt is scheduled from that attempt, as always: advance again
to reach it. Live deliveries are never moved (webhookd's AdvanceSandboxClock refuses any other
environment, and its statement touches sandbox rows only).
"""

from __future__ import annotations

from google.protobuf import duration_pb2
from sanic import Blueprint
from sanic.response import HTTPResponse

from edge import convert
from edge.context import EdgeRequest
from edge.environments import Environment
from edge.exceptions import EdgeError
from edge.gate import Ctx, guarded
from edge.responses import json_response
from svckit.durations import clock_advance, spelled
from svckit.prototables import HOOKS_ENVIRONMENT
from travel.webhooks.v1 import webhooks_pb2

bp = Blueprint("sandbox_clock")
PATH = "/v1/sandbox/clock/advance"


@bp.post(PATH)
@guarded("webhooks:write")
async def advance_clock(request: EdgeRequest, ctx: Ctx) -> HTTPResponse:
    if ctx.environment is not Environment.SANDBOX:
        raise EdgeError(f"POST {PATH} exists only on the sandbox host", type="not_found")
    body = convert.only_fields(ctx.body, {"by"})
    text = convert.string_field(body, "by", required=True, max_len=32) or ""
    try:
        by = clock_advance(text)
    except ValueError as exc:
        raise EdgeError(f"the field by: {exc}", type="invalid_request") from None
    resp = await request.app.ctx.hooks.advance_sandbox_clock(
        webhooks_pb2.AdvanceSandboxClockRequest(
            account_id=ctx.caller.account_id,
            environment=HOOKS_ENVIRONMENT.pb(ctx.environment),
            by=duration_pb2.Duration(seconds=int(by.total_seconds())),
        )
    )
    return json_response(
        {"object": "sandbox_clock", "advancedBy": spelled(by), "deliveriesDue": resp.deliveries_due}
    )
