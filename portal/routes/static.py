"""GET /static/<name> (the stylesheet, the script, htmx, the icon), GET /favicon.ico, GET /healthz
(liveness) and GET /readyz (readiness: authsvc and webhookd answer; svckit.readiness)."""

from __future__ import annotations

import pathlib

from sanic import Blueprint, response
from sanic.response import HTTPResponse

from portal.context import PortalRequest
from svckit.clients import ClientError
from svckit.readiness import answer, peer_check, readiness

ROOT = pathlib.Path(__file__).resolve().parents[2]
STATIC = pathlib.Path(__file__).resolve().parents[1] / "static"
HTMX = ROOT / "node_modules" / "htmx.org" / "dist" / "htmx.min.js"
FILES = {
    "portal.css": (STATIC / "portal.css", "text/css"),
    "portal.js": (STATIC / "portal.js", "text/javascript"),
    "htmx.min.js": (HTMX, "text/javascript"),
    "favicon.svg": (STATIC / "favicon.svg", "image/svg+xml"),
}

bp = Blueprint("portal_static")


@bp.get("/static/<name:str>")
async def static(request: PortalRequest, name: str) -> HTTPResponse:
    if name not in FILES:
        raise ClientError("not_found", "No such file.")
    path, mime = FILES[name]
    resp = response.raw(path.read_bytes(), content_type=mime)
    resp.headers["Cache-Control"] = "public, max-age=300"
    return resp


@bp.get("/favicon.ico")
async def favicon(request: PortalRequest) -> HTTPResponse:
    """Browsers ask for /favicon.ico whatever the page links: the SVG icon (every page links it)."""
    resp = response.redirect("/static/favicon.svg", status=301)
    resp.headers["Cache-Control"] = "public, max-age=86400"
    return resp


@bp.get("/healthz")
async def healthz(request: PortalRequest) -> HTTPResponse:
    return response.json({"status": "ok"})


@bp.get("/readyz")
async def readyz(request: PortalRequest) -> HTTPResponse:
    ctx = request.app.ctx
    checks = {"authsvc": peer_check(ctx.auth.channel), "webhookd": peer_check(ctx.hooks.channel)}
    status, body = answer(await readiness(checks))
    return response.json(body, status=status, headers={"Cache-Control": "no-store"})
