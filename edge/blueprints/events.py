"""GET /v1/events and GET /v1/events/{id}: the account's events of the last 30 days, read back (as
Stripe's events API), so a partner can reconcile what a webhook outage made it miss, or read the whole
event a thin delivery names. Any valid key may ask; the list holds the events its scopes may read, as on
/v1/stream (edge.streamfilter), and one event it may not read is 403 missing_scope."""

from __future__ import annotations

import re
from typing import Any

from sanic import Blueprint
from sanic.response import HTTPResponse

from edge import convert
from edge.blueprints.webhooks import hooks, query_args, scope_of
from edge.context import EdgeRequest
from edge.exceptions import EdgeError
from edge.gate import Ctx, guarded
from edge.responses import json_response
from edge.streamfilter import may_read, readable_kinds, scopes_for_event, unknown_patterns, wanted
from svckit.events import EVENT_KINDS
from travel.webhooks.v1 import webhooks_pb2

bp = Blueprint("events")


def _readable(ctx: Ctx, envelope: dict[str, Any]) -> bool:
    data = envelope.get("data")
    return may_read(
        ctx.caller.scopes, str(envelope.get("type", "")), data if isinstance(data, dict) else None
    )


def _kinds(args: Any) -> list[str] | None:
    """``type``: event kinds or families (``booking.*``), repeated or comma-separated; None: every kind."""
    raws = args.getlist("type", [])
    patterns = [p.strip() for raw in raws for p in raw.split(",") if p.strip()]
    if not patterns:
        if raws:  # type= with nothing in it
            raise EdgeError("the query parameter type names no event kind", type="invalid_request")
        return None
    unknown = unknown_patterns(patterns)
    if unknown:
        raise EdgeError(
            f"the query parameter type names no event kind: {', '.join(unknown)}", type="invalid_request"
        )
    return [k for k in EVENT_KINDS if wanted(patterns, k)]


# RFC 3339 date-time (what the document declares); Python's ISO 8601 parser alone reads more.
_RFC3339 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})"
)


def _time(args: Any, name: str) -> Any:
    raw = args.get(name)
    if raw is None:
        return None
    if not _RFC3339.fullmatch(raw.upper()):
        raise EdgeError(f"the query parameter {name} must be an RFC 3339 date-time", type="invalid_request")
    return convert.timestamp(raw.upper(), name)


@bp.get("/v1/events")
@guarded("")
async def list_events(request: EdgeRequest, ctx: Ctx) -> HTTPResponse:
    """The account's events of the last 30 days that the key may read, newest first."""
    args = query_args(request)
    asked = _kinds(args)
    kinds = [k for k in readable_kinds(ctx.caller.scopes) if asked is None or k in asked]
    since, until = _time(args, "created[gte]"), _time(args, "created[lt]")
    limit = convert.query_limit(args)
    # Reconciliation: the events an endpoint has not received (held or failed), webhooks:read only.
    undelivered = convert.query_id(args, "undeliveredTo", "we")
    if undelivered and "webhooks:read" not in ctx.caller.scopes:
        raise EdgeError("undeliveredTo needs the scope webhooks:read", type="missing_scope")
    empty_range = since is not None and until is not None and since.ToDatetime() >= until.ToDatetime()
    if not kinds or empty_range:  # nothing this key may read (an empty list would ask for every kind),
        # or no time between created[gte] and created[lt]
        return json_response({"object": "list", "data": [], "nextPageToken": None})
    resp = await hooks(request).list_events(
        webhooks_pb2.ListEventsRequest(
            **scope_of(ctx),
            types=kinds,
            since=since,
            until=until,
            page_size=limit,
            page_token=args.get("page_token", ""),
            undelivered_to=undelivered,
        ),
    )
    data = [e for e in map(convert.event, resp.events) if _readable(ctx, e)]
    return json_response({"object": "list", "data": data, "nextPageToken": resp.next_page_token or None})


@bp.get("/v1/events/<event_id:str>")
@guarded("")
async def get_event(request: EdgeRequest, ctx: Ctx, event_id: str) -> HTTPResponse:
    """One event of the last 30 days, whole (what a thin delivery points at): with a scope that reads
    its kind (the catalog's reader: a booking's product's ``<product>:read``, ...), else 403
    missing_scope naming it; an unknown or another account's id is not found. Always in the request log
    (``Ctx.audited``): the event may hold a traveller's data."""
    ctx.audited = True
    eid = convert.path_id(event_id, "event", "evt")
    resp = await hooks(request).get_event(webhooks_pb2.GetEventRequest(**scope_of(ctx), event_id=eid))
    envelope = convert.event(resp.event)
    if not _readable(ctx, envelope):
        data = envelope.get("data")
        needed = scopes_for_event(str(envelope.get("type", "")), data if isinstance(data, dict) else None)
        raise EdgeError(
            f"reading event {eid} needs the scope {' or '.join(needed) or 'of its kind'}",
            type="missing_scope",
        )
    return json_response(envelope)
