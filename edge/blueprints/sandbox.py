"""POST /v1/sandbox/events: publish a sample event of any kind (sandbox only, webhooks:write).

The sample goes through webhookd's PublishEvent like every real event: stored, signed, delivered to the
account's sandbox endpoints subscribed to the kind, retried, logged and on /v1/stream. ``data`` (an
object) is merged over the sample's data, so a partner can use its own booking id or customerRef; a field
the kind does not have, or a value its schema refuses, is a 400 (edge.samplecheck): a sample is shaped as
a live event of its kind, always. The sample's data is at most ``SANDBOX_DATA_MAX_BYTES`` (64 KiB, 413
payload_too_large above it; the edge's body limit, 1 MiB, is the outer one), and webhookd bounds an
account's sandbox events per day (429 rate_limited past it): docs/webhooks.md "Sandbox bounds".
"""

from __future__ import annotations

import datetime as dt

from sanic import Blueprint
from sanic.response import HTTPResponse

from edge import convert
from edge.context import EdgeRequest
from edge.environments import Environment
from edge.exceptions import EdgeError
from edge.gate import Ctx, guarded
from edge.responses import json_response
from edge.samplecheck import refusal as data_refusal
from edge.samples import sample
from svckit.events import EVENT_KINDS, SANDBOX_DATA_MAX_BYTES, data_bytes, mode_refusal

bp = Blueprint("sandbox")


@bp.post("/v1/sandbox/events")
@guarded("webhooks:write")
async def sample_event(request: EdgeRequest, ctx: Ctx) -> HTTPResponse:
    if ctx.environment is not Environment.SANDBOX:
        raise EdgeError("POST /v1/sandbox/events exists only on the sandbox host", type="not_found")
    body = convert.only_fields(ctx.body, {"type", "data"})
    kind = convert.string_field(body, "type", required=True, max_len=64) or ""
    if kind not in EVENT_KINDS:
        raise EdgeError(
            f"type: unknown event kind {kind!r}; one of {', '.join(EVENT_KINDS)}", type="invalid_request"
        )
    refusal = mode_refusal(kind, ctx.caller.account_mode)
    if refusal:
        raise EdgeError(refusal, type="invalid_request")
    extra = body.get("data", {})
    if not isinstance(extra, dict):
        raise EdgeError("data must be a JSON object (merged over the sample's data)", type="invalid_request")
    caller = ctx.caller
    state, data = sample(kind, caller.account_mode, dt.datetime.now(dt.UTC), caller.daily_search_allowance)
    size = data_bytes({**data, **extra})  # what would be stored; measured before anything else reads it
    if size > SANDBOX_DATA_MAX_BYTES:
        raise EdgeError(
            f"data: {size} bytes, a sandbox event's data is at most {SANDBOX_DATA_MAX_BYTES} bytes",
            type="payload_too_large",
        )
    problem = data_refusal(kind, data, extra)
    if problem:
        raise EdgeError(problem, type="invalid_request")
    data.update(extra)
    resp = await request.app.ctx.publisher.publish(
        # The partner's Idempotency-Key: a re-run after this edge died mid-request is the same event.
        caller.account_id, ctx.environment, kind, state, data, key=f"sample:{ctx.idempotency_key}",
        request_id=ctx.request_id,
    )  # fmt: skip
    return json_response(
        {"object": "sandbox_event", "event": convert.event(resp.event), "deliveryCount": resp.delivery_count},
        status=202,
    )
