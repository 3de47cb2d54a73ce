"""Request plumbing of the portal: security headers, request ids, the CSRF token, the signed-in user,
rendering, and the one place errors become pages (with the request id)."""

from __future__ import annotations

import logging
import secrets
import time
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from prometheus_client import Histogram
from sanic import Request, response
from sanic.handlers import ErrorHandler
from sanic.log import error_logger
from sanic.response import BaseHTTPResponse, HTTPResponse

from portal import csrf, display
from portal.context import PortalRequest, Viewer
from svckit import roles
from svckit.clients import ClientError
from svckit.ids import new_id
from svckit.logs import request_id_var
from svckit.vocabulary import Environment as Env

log = logging.getLogger("portal")

REQUESTS = Histogram(
    "portal_request_seconds",
    "Portal HTTP requests by route and status, server-side time",
    ["route", "status"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
SESSION_COOKIE = "portal_session"
CSRF_COOKIE = "portal_csrf"
ENVIRONMENTS = tuple(e.value for e in Env)
SECURITY_HEADERS = {
    # No inline script or style anywhere: every script and stylesheet is a file under /static.
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; "
    "form-action 'self'; base-uri 'none'; object-src 'none'",
    "Referrer-Policy": "same-origin",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}

templates = Environment(
    loader=PackageLoader("portal", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)
templates.filters.update(display.FILTERS)
templates.globals.update(display.GLOBALS)


def csrf_token(request: PortalRequest) -> str:
    """The token this request's forms carry (portal.csrf): the session's when signed in, else the one of
    the browser's nonce cookie (made now, and set on the response, when it has none)."""
    viewer = request.ctx.viewer
    if viewer is not None:
        return csrf.token(request.app.ctx.csrf_key, viewer.session_id, "")
    nonce = request.cookies.get(CSRF_COOKIE) or request.ctx.new_csrf
    if not nonce:
        nonce = request.ctx.new_csrf = secrets.token_urlsafe(32)
    return csrf.token(request.app.ctx.csrf_key, "", nonce)


def check_csrf(request: PortalRequest) -> None:
    """Every state-changing request carries its token (form field ``csrf`` or the X-CSRF-Token header)."""
    viewer = request.ctx.viewer
    sent = (request.form.get("csrf") if request.form else None) or request.headers.get("x-csrf-token", "")
    session_id = viewer.session_id if viewer is not None else ""
    nonce = "" if viewer is not None else (request.cookies.get(CSRF_COOKIE) or "")
    if not csrf.valid(request.app.ctx.csrf_key, session_id, nonce, str(sent)):
        raise ClientError("forbidden", "The form expired or did not come from this portal; reload and retry.")


def viewer_of(request: PortalRequest) -> Viewer:
    """The signed-in user: every route outside the public ones has one (``lifecycle.load``)."""
    viewer = request.ctx.viewer
    if viewer is None:
        raise ClientError("session_expired", "Your session has ended; sign in again.")
    return viewer


def need(request: PortalRequest, action: roles.Action) -> Viewer:
    viewer = viewer_of(request)
    if not viewer.can(action):
        raise ClientError("forbidden", f"Your role ({viewer.role}) does not allow this ({action}).")
    return viewer


def env_of(request: PortalRequest) -> str:
    """The environment of a page's URL (/<env>/...); any other first segment is no page."""
    env = request.match_info.get("env", "live")
    if env not in ENVIRONMENTS:
        raise ClientError("not_found", "No such page.")
    return str(env)


def route_of(request: Request[Any, Any]) -> str:
    """The route template of ``request`` ("/invite/<token:str>"): logs name it, never the path."""
    return "/" + request.route.path if request.route else "(none)"


class RouteErrorHandler(ErrorHandler):
    """Sanic's handler logs the whole URL of a request that raised, and a portal URL can hold a secret
    (the invitation token of /invite/<token>): this one logs the method and route template instead."""

    @staticmethod
    def log(request: Request, exception: Exception) -> None:
        if getattr(exception, "quiet", False) and not request.app.config.get("NOISY_EXCEPTIONS"):
            return
        error_logger.error(
            "Exception occurred while handling %s %s", request.method, route_of(request), exc_info=exception
        )


def begin(request: PortalRequest) -> None:
    rid = request.headers.get("x-request-id", "")
    request.ctx.rid = rid if 0 < len(rid) <= 64 and rid.isprintable() else new_id("req")
    request.ctx.token = request_id_var.set(request.ctx.rid)
    request.ctx.new_csrf = ""
    request.ctx.viewer = None
    request.ctx.started = time.perf_counter()


def finish(request: PortalRequest, resp: BaseHTTPResponse, secure: bool) -> None:
    for name, value in SECURITY_HEADERS.items():
        resp.headers.setdefault(name, value)
    ctx = request.ctx
    if ctx.rid:
        resp.headers["X-Request-Id"] = ctx.rid
    if ctx.new_csrf:
        set_cookie(resp, CSRF_COOKIE, ctx.new_csrf, secure)
    started = ctx.started
    if started is not None:
        elapsed = time.perf_counter() - started
        route = route_of(request)
        REQUESTS.labels(route, str(resp.status)).observe(elapsed)
        log.info(
            "request",
            extra={
                "method": request.method,
                "route": route,
                "status": resp.status,
                "ms": round(elapsed * 1000, 1),
            },
        )
    if ctx.token is not None:
        request_id_var.reset(ctx.token)
        ctx.token = None


def set_cookie(
    resp: BaseHTTPResponse, name: str, value: str, secure: bool, max_age: int | None = None
) -> None:
    resp.add_cookie(name, value, path="/", httponly=True, samesite="Lax", secure=secure, max_age=max_age)


def signed_in(request: PortalRequest, token: str, to: str = "/live/") -> HTTPResponse:
    """The answer to a sign-in (or a password change): the new session's cookie, then ``to``."""
    resp = response.redirect(to, status=303)
    set_cookie(resp, SESSION_COOKIE, token, request.app.ctx.secure)
    return resp


def render(request: PortalRequest, template: str, status: int = 200, **context: Any) -> HTTPResponse:
    viewer = request.ctx.viewer
    env = context.pop("env", None) or request.match_info.get("env") or "live"
    other = "sandbox" if env == "live" else "live"
    path = request.path
    switch = path.replace(f"/{env}/", f"/{other}/", 1) if path.startswith(f"/{env}/") else f"/{other}/"
    body = templates.get_template(template).render(
        viewer=viewer,
        env=env,
        other_env=other,
        switch_url=switch,
        csrf=csrf_token(request),
        request_id=request.ctx.rid,
        path=path,
        errors=context.pop("errors", {}),
        **context,
    )
    return response.html(body, status=status)


def error_page(request: PortalRequest, error: ClientError) -> HTTPResponse:
    if request.headers.get("hx-request"):
        body = templates.get_template("_error.html").render(error=error, request_id=request.ctx.rid)
        return response.html(body, status=error.status)
    return render(request, "error.html", status=error.status, error=error)
