"""Webhook endpoint management under /v1/webhooks/... (webhooks:read to read, webhooks:write to change)."""

from __future__ import annotations

from typing import Any, TypeVar

from google.protobuf import duration_pb2, field_mask_pb2
from sanic import Blueprint
from sanic.response import HTTPResponse

from edge import convert, destinations
from edge.context import EdgeRequest
from edge.exceptions import EdgeError
from edge.gate import Ctx, guarded
from edge.receiver_auth import receiver_auth_field
from edge.responses import json_response
from svckit.clients import HooksClient
from svckit.prototables import DELIVERY_STATUS, HOOKS_ENVIRONMENT
from travel.webhooks.v1 import webhooks_pb2

bp = Blueprint("webhooks")
T = TypeVar("T")
MAX_OVERLAP = 7 * 24 * 3600
ENDPOINT_FIELDS = {
    "url",
    "events",
    "description",
    "signatureScheme",
    "ordering",
    "filter",
    "payload",
    "receiverAuth",
    *destinations.FIELDS,
}


def hooks(request: EdgeRequest) -> HooksClient:
    """The app's webhookd client (its deadline is ``--webhookd-timeout``)."""
    return request.app.ctx.hooks


def scope_of(ctx: Ctx) -> dict[str, Any]:
    return {"account_id": ctx.caller.account_id, "environment": HOOKS_ENVIRONMENT.pb(ctx.environment)}


def query_args(request: EdgeRequest) -> Any:
    """The query with blank values kept (Sanic's ``args`` drops them): ``?limit=`` is a limit that is no
    number (400), as the OpenAPI document says, not a missing one; an empty id filter is no filter."""
    return request.get_args(keep_blank_values=True)


def _list(data: list[dict[str, Any]], next_page_token: str) -> HTTPResponse:
    """A page of a list, Stripe style."""
    return json_response({"object": "list", "data": data, "nextPageToken": next_page_token or None})


@bp.get("/v1/webhooks/endpoints")
@guarded("webhooks:read")
async def list_endpoints(request: EdgeRequest, ctx: Ctx) -> HTTPResponse:
    resp = await hooks(request).list_endpoints(
        webhooks_pb2.ListEndpointsRequest(
            **scope_of(ctx),
            page_size=convert.query_limit(query_args(request)),
            page_token=request.args.get("page_token", ""),
        ),
    )
    return _list([convert.endpoint(e) for e in resp.endpoints], resp.next_page_token)


@bp.post("/v1/webhooks/endpoints")
@guarded("webhooks:write")
async def create_endpoint(request: EdgeRequest, ctx: Ctx) -> HTTPResponse:
    body = convert.only_fields(ctx.body, ENDPOINT_FIELDS)
    destinations.refuse_nulls(body)
    url = convert.string_field(body, "url") or ""
    events = convert.string_list_field(body, "events", required=True)
    description = convert.string_field(body, "description", max_len=1024) or ""
    resp = await hooks(request).register_endpoint(
        webhooks_pb2.RegisterEndpointRequest(
            **scope_of(ctx),
            url=url,
            events=events,
            description=description,
            idempotency_key=ctx.idempotency_key,
            signature_scheme=convert.signature_scheme_field(body),
            ordering=convert.ordering_field(body),
            filter_json=convert.filter_field(body),
            payload=convert.payload_field(body),
            **destinations.request_fields(body),
            receiver_auth=receiver_auth_field(body),
        ),
    )
    out = convert.endpoint(resp.endpoint)
    out["secret"] = resp.signing_secret
    return json_response(out, status=201)


@bp.get("/v1/webhooks/endpoints/<endpoint_id:str>")
@guarded("webhooks:read")
async def get_endpoint(request: EdgeRequest, ctx: Ctx, endpoint_id: str) -> HTTPResponse:
    eid = convert.path_id(endpoint_id, "webhook endpoint", "we")
    resp = await hooks(request).get_endpoint(
        webhooks_pb2.GetEndpointRequest(**scope_of(ctx), endpoint_id=eid)
    )
    return json_response(convert.endpoint(resp.endpoint))


@bp.post("/v1/webhooks/endpoints/<endpoint_id:str>")
@guarded("webhooks:write")
async def update_endpoint(request: EdgeRequest, ctx: Ctx, endpoint_id: str) -> HTTPResponse:
    eid = convert.path_id(endpoint_id, "webhook endpoint", "we")
    body = convert.only_fields(ctx.body, ENDPOINT_FIELDS)
    if not body:
        raise EdgeError(
            "nothing to update: send one or more of url, events, description, signatureScheme, ordering,"
            " filter, payload, type, amqp, nats, receiverAuth",
            type="invalid_request",
        )
    destinations.refuse_nulls(body)
    url = convert.string_field(body, "url")
    events = convert.string_list_field(body, "events")
    description = convert.string_field(body, "description", max_len=1024)
    resp = await hooks(request).update_endpoint(
        webhooks_pb2.UpdateEndpointRequest(
            **scope_of(ctx),
            endpoint_id=eid,
            update_mask=field_mask_pb2.FieldMask(paths=destinations.mask_paths(body)),
            url=url or "",
            events=events or [],
            description=description or "",
            signature_scheme=convert.signature_scheme_field(body),
            ordering=convert.ordering_field(body),
            filter_json=convert.filter_field(body),
            payload=convert.payload_field(body),
            **destinations.request_fields(body, update=True),
            receiver_auth=receiver_auth_field(body),
        ),
    )
    return json_response(convert.endpoint(resp.endpoint))


@bp.delete("/v1/webhooks/endpoints/<endpoint_id:str>")
@guarded("webhooks:write")
async def delete_endpoint(request: EdgeRequest, ctx: Ctx, endpoint_id: str) -> HTTPResponse:
    eid = convert.path_id(endpoint_id, "webhook endpoint", "we")
    await hooks(request).delete_endpoint(webhooks_pb2.DeleteEndpointRequest(**scope_of(ctx), endpoint_id=eid))
    # The deleted state, as Stripe answers a deletion (not the endpoint's last status).
    return json_response({"object": "webhook_endpoint", "id": eid, "deleted": True})


@bp.post("/v1/webhooks/endpoints/<endpoint_id:str>/rotate_secret")
@guarded("webhooks:write")
async def rotate_secret(request: EdgeRequest, ctx: Ctx, endpoint_id: str) -> HTTPResponse:
    eid = convert.path_id(endpoint_id, "webhook endpoint", "we")
    body = convert.only_fields(ctx.body, {"overlapSeconds"})
    overlap = convert.int_field(body, "overlapSeconds", 0, MAX_OVERLAP)
    msg = webhooks_pb2.RotateSigningSecretRequest(
        **scope_of(ctx), endpoint_id=eid, idempotency_key=ctx.idempotency_key
    )
    if overlap is not None:
        msg.overlap.CopyFrom(duration_pb2.Duration(seconds=overlap))
    resp = await hooks(request).rotate_signing_secret(msg)
    out = convert.endpoint(resp.endpoint)
    out["secret"] = resp.signing_secret
    return json_response(out)


@bp.get("/v1/webhooks/signing-keys")
@guarded("webhooks:read")
async def list_signing_keys(request: EdgeRequest, ctx: Ctx) -> HTTPResponse:
    """The public ed25519 keys of the Standard Webhooks ``v1a`` signatures (``?endpoint=we_...``: one's)."""
    endpoint = request.args.get("endpoint")
    eid = convert.path_id(endpoint, "webhook endpoint", "we") if endpoint else ""
    resp = await hooks(request).list_signing_keys(
        webhooks_pb2.ListSigningKeysRequest(**scope_of(ctx), endpoint_id=eid)
    )
    return _list([convert.signing_key(k) for k in resp.keys], "")


@bp.post("/v1/webhooks/endpoints/<endpoint_id:str>/enable")
@guarded("webhooks:write")
async def enable_endpoint(request: EdgeRequest, ctx: Ctx, endpoint_id: str) -> HTTPResponse:
    eid = convert.path_id(endpoint_id, "webhook endpoint", "we")
    convert.only_fields(ctx.body, set())
    resp = await hooks(request).enable_endpoint(
        webhooks_pb2.EnableEndpointRequest(**scope_of(ctx), endpoint_id=eid)
    )
    return json_response(convert.endpoint(resp.endpoint))


@bp.post("/v1/webhooks/endpoints/<endpoint_id:str>/recover")
@guarded("webhooks:write")
async def recover_endpoint(request: EdgeRequest, ctx: Ctx, endpoint_id: str) -> HTTPResponse:
    eid = convert.path_id(endpoint_id, "webhook endpoint", "we")
    body = convert.only_fields(ctx.body, {"since", "dryRun"})
    since = convert.string_field(body, "since", required=True, max_len=64) or ""
    ts = convert.timestamp(since, "since")
    dry_run = body.get("dryRun", False)
    if not isinstance(dry_run, bool):
        raise EdgeError("the field dryRun must be true or false", type="invalid_request")
    resp = await hooks(request).recover_endpoint(
        webhooks_pb2.RecoverEndpointRequest(**scope_of(ctx), endpoint_id=eid, since=ts, dry_run=dry_run),
    )
    out = {"object": "webhook_recovery", "endpointId": eid, "recovered": resp.recovered_count}
    return json_response({**out, "dryRun": True} if dry_run else out)


@bp.post("/v1/webhooks/endpoints/<endpoint_id:str>/test")
@guarded("webhooks:write")
async def send_test(request: EdgeRequest, ctx: Ctx, endpoint_id: str) -> HTTPResponse:
    eid = convert.path_id(endpoint_id, "webhook endpoint", "we")
    convert.only_fields(ctx.body, set())
    resp = await hooks(request).send_test_event(
        webhooks_pb2.SendTestEventRequest(**scope_of(ctx), endpoint_id=eid)
    )
    return json_response(
        {
            "object": "webhook_test",
            "event": convert.event(resp.event),
            "delivery": convert.delivery(resp.delivery),
        },
        status=202,
    )


@bp.get("/v1/webhooks/deliveries")
@guarded("webhooks:read")
async def list_deliveries(request: EdgeRequest, ctx: Ctx) -> HTTPResponse:
    args = query_args(request)
    status_name = args.get("status")
    status = 0
    if status_name is not None:
        try:
            status = DELIVERY_STATUS.pb(status_name)
        except ValueError:
            raise EdgeError(
                "the query parameter status must be one of pending, succeeded, failed, held",
                type="invalid_request",
            ) from None
    resp = await hooks(request).list_deliveries(
        webhooks_pb2.ListDeliveriesRequest(
            **scope_of(ctx),
            endpoint_id=convert.query_id(args, "endpoint", "we"),
            event_id=convert.query_id(args, "event", "evt"),
            status=status,  # type: ignore[arg-type]
            page_size=convert.query_limit(args),
            page_token=args.get("page_token", ""),
        ),
    )
    return _list([convert.delivery(d) for d in resp.deliveries], resp.next_page_token)


@bp.get("/v1/webhooks/attempts")
@guarded("webhooks:read")
async def list_attempts(request: EdgeRequest, ctx: Ctx) -> HTTPResponse:
    args = query_args(request)
    resp = await hooks(request).list_attempts(
        webhooks_pb2.ListAttemptsRequest(
            **scope_of(ctx),
            endpoint_id=convert.query_id(args, "endpoint", "we"),
            event_id=convert.query_id(args, "event", "evt"),
            delivery_id=convert.query_id(args, "delivery", "msg"),
            page_size=convert.query_limit(args),
            page_token=args.get("page_token", ""),
        ),
    )
    return _list([convert.attempt(a) for a in resp.attempts], resp.next_page_token)


@bp.post("/v1/webhooks/attempts/<attempt_id:str>/resend")
@guarded("webhooks:write")
async def resend_attempt(request: EdgeRequest, ctx: Ctx, attempt_id: str) -> HTTPResponse:
    aid = convert.path_id(attempt_id, "webhook attempt", "att")
    convert.only_fields(ctx.body, set())
    resp = await hooks(request).resend_attempt(
        webhooks_pb2.ResendAttemptRequest(**scope_of(ctx), attempt_id=aid)
    )
    return json_response(convert.delivery(resp.delivery), status=202)
