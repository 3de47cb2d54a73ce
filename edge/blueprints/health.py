"""GET /healthz (liveness: the process answers) and GET /readyz (readiness: the edge's database, authsvc
and webhookd answer; 503 naming the failing ones otherwise), on both listeners and any Host, with no key:
what a balancer or an orchestrator asks (svckit.readiness, docs/operations.md "Health")."""

from __future__ import annotations

from sanic import Blueprint
from sanic.response import HTTPResponse, json

from edge.context import EdgeRequest
from svckit.readiness import answer, database_check, peer_check, readiness

bp = Blueprint("health")

NO_STORE = {"Cache-Control": "no-store"}


@bp.get("/healthz")
async def healthz(request: EdgeRequest) -> HTTPResponse:
    return json({"status": "ok"}, headers=NO_STORE)


@bp.get("/readyz")
async def readyz(request: EdgeRequest) -> HTTPResponse:
    ctx = request.app.ctx
    status, body = answer(
        await readiness(
            {
                "database": database_check(ctx.engine),
                "authsvc": peer_check(ctx.auth.channel),
                "webhookd": peer_check(ctx.hooks.channel),
            }
        )
    )
    return json(body, status=status, headers=NO_STORE)
