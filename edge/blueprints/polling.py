"""A polling endpoint's consumers (docs/webhooks.md "Polling"): ``GET /v1/webhooks/endpoints/{id}/poll``
leases a batch of its events, ``POST /v1/webhooks/endpoints/{id}/poll/commit`` acknowledges it.

Both need ``webhooks:read``, the commit too: a consumer that may read an endpoint's events acknowledges
them, and nothing more; ``webhooks:write`` would also let it change or delete endpoints. A commit changes
only what that consumer was given (Kafka asks the same of a consumer committing its offsets: read).
"""

from __future__ import annotations

import json
from typing import Any

from sanic import Blueprint
from sanic.response import HTTPResponse

from edge import convert
from edge.blueprints.webhooks import hooks, query_args, scope_of
from edge.context import EdgeRequest
from edge.exceptions import EdgeError
from edge.gate import Ctx, guarded
from edge.responses import json_response
from travel.webhooks.v1 import webhooks_pb2

bp = Blueprint("polling")
# The bounds webhookd keeps too (webhookd._polling): checked here first so a bad one costs no call.
MAX_LIMIT = 500
DEFAULT_LIMIT = 100
MIN_LEASE, MAX_LEASE, DEFAULT_LEASE = 1, 900, 30


def _bounded(args: Any, name: str, lo: int, hi: int, default: int) -> int:
    raw = args.get(name)
    if raw is None:
        return default
    if not (isinstance(raw, str) and raw.isascii() and raw.isdigit() and len(raw) <= 6) or not (
        lo <= int(raw) <= hi
    ):
        raise EdgeError(
            f"the query parameter {name} must be an integer from {lo} to {hi} (default {default})",
            type="invalid_request",
        )
    return int(raw)


def _event(envelope_json: str) -> dict[str, Any]:
    value = json.loads(envelope_json)
    return value if isinstance(value, dict) else {"event": value}


@bp.get("/v1/webhooks/endpoints/<endpoint_id:str>/poll")
@guarded("webhooks:read")
async def poll(request: EdgeRequest, ctx: Ctx, endpoint_id: str) -> HTTPResponse:
    eid = convert.path_id(endpoint_id, "webhook endpoint", "we")
    args = query_args(request)
    limit = _bounded(args, "limit", 1, MAX_LIMIT, DEFAULT_LIMIT)
    lease = _bounded(args, "leaseSeconds", MIN_LEASE, MAX_LEASE, DEFAULT_LEASE)
    resp = await hooks(request).poll_endpoint(
        webhooks_pb2.PollEndpointRequest(**scope_of(ctx), endpoint_id=eid, limit=limit, lease_seconds=lease)
    )
    return json_response(
        {
            "object": "webhook_poll",
            "data": [_event(e.envelope_json) for e in resp.events],
            "cursor": resp.cursor or None,
            "leaseExpiresAt": convert.rfc3339(resp.lease_expires_at) if resp.cursor else None,
        }
    )


@bp.post("/v1/webhooks/endpoints/<endpoint_id:str>/poll/commit")
@guarded("webhooks:read")
async def commit(request: EdgeRequest, ctx: Ctx, endpoint_id: str) -> HTTPResponse:
    eid = convert.path_id(endpoint_id, "webhook endpoint", "we")
    body = convert.only_fields(ctx.body, {"cursor"})
    cursor = convert.string_field(body, "cursor", required=True, max_len=64) or ""
    resp = await hooks(request).commit_poll(
        webhooks_pb2.CommitPollRequest(**scope_of(ctx), endpoint_id=eid, cursor=cursor)
    )
    return json_response(
        {"object": "webhook_poll_commit", "cursor": cursor, "committed": resp.committed_count}
    )
