"""GET /openapi.json: the OpenAPI 3.1 document of the whole edge (no key needed)."""

from __future__ import annotations

from sanic import Blueprint
from sanic.response import HTTPResponse

from edge.context import EdgeRequest
from edge.negotiation import check_accept
from edge.openapi import build_openapi
from edge.responses import json_response

bp = Blueprint("docs")


@bp.get("/openapi.json")
async def openapi(request: EdgeRequest) -> HTTPResponse:
    app_ctx = request.app.ctx
    gate = app_ctx.gate
    rid = gate.request_id(request)
    env = gate.hosts.environment(request.headers.get("host"))
    check_accept(request.headers.get("accept"))
    doc = app_ctx.openapi
    if doc is None:
        doc = app_ctx.openapi = build_openapi(app_ctx.config)
    host = request.headers.get("host")
    out = dict(doc)
    out["servers"] = [{"url": f"{request.scheme}://{host}", "description": f"this host ({env.value})"}]
    return json_response(out, headers={"X-Request-Id": rid})
