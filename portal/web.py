"""Request plumbing of the portal: security headers, request ids, the CSRF token, the signed-in user,
rendering, and the one place errors become pages (with the request id)."""

from __future__ import annotations

import logging
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from prometheus_client import Histogram
from sanic import Request, response
from sanic.handlers import ErrorHandler
from sanic.log import error_logger
from sanic.response import HTTPResponse

from portal import csrf
from portal.peers import PortalError
from svckit import roles
from svckit.ids import new_id
from svckit.logs import request_id_var
from travel.auth.v1 import identity_pb2 as ipb

log = logging.getLogger("portal")

REQUESTS = Histogram(
    "portal_request_seconds",
    "Portal HTTP requests by route and status, server-side time",
    ["route", "status"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
SESSION_COOKIE = "portal_session"
CSRF_COOKIE = "portal_csrf"
ENVIRONMENTS = ("live", "sandbox")
ROLE_NAMES = {
    ipb.USER_ROLE_OWNER: "owner",
    ipb.USER_ROLE_ADMIN: "admin",
    ipb.USER_ROLE_DEVELOPER: "developer",
    ipb.USER_ROLE_VIEWER: "viewer",
}
ROLE_VALUES = {name: value for value, name in ROLE_NAMES.items()}
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


@dataclass
class Viewer:
    """The signed-in portal user of a request."""

    user: ipb.User
    session_token: str
    # authsvc's id of the session (ses_...): what the CSRF token of a signed-in form is bound to.
    session_id: str
    # The account requires TOTP of owners and admins and this one has none: it may only enrol.
    enrolment_required: bool = False
    account_requires_totp: bool = False
    role: str = field(init=False)

    def __post_init__(self) -> None:
        self.role = ROLE_NAMES.get(self.user.role, "")

    def can(self, action: roles.Action) -> bool:
        return roles.allowed(self.role, action)


def csrf_token(request: Request) -> str:
    """The token this request's forms carry (portal.csrf): the session's when signed in, else the one of
    the browser's nonce cookie (made now, and set on the response, when it has none)."""
    viewer: Viewer | None = request.ctx.viewer
    if viewer is not None:
        return csrf.token(request.app.ctx.csrf_key, viewer.session_id, "")
    nonce = request.cookies.get(CSRF_COOKIE) or request.ctx.new_csrf
    if not nonce:
        nonce = request.ctx.new_csrf = secrets.token_urlsafe(32)
    return csrf.token(request.app.ctx.csrf_key, "", nonce)


def check_csrf(request: Request) -> None:
    """Every state-changing request carries its token (form field ``csrf`` or the X-CSRF-Token header)."""
    viewer: Viewer | None = request.ctx.viewer
    sent = (request.form.get("csrf") if request.form else None) or request.headers.get("x-csrf-token", "")
    session_id = viewer.session_id if viewer is not None else ""
    nonce = "" if viewer is not None else (request.cookies.get(CSRF_COOKIE) or "")
    if not csrf.valid(request.app.ctx.csrf_key, session_id, nonce, str(sent)):
        raise PortalError(
            403, "forbidden", "The form expired or did not come from this portal; reload and retry."
        )


def need(request: Request, action: roles.Action) -> Viewer:
    viewer: Viewer = request.ctx.viewer
    if not viewer.can(action):
        raise PortalError(403, "forbidden", f"Your role ({viewer.role}) does not allow this ({action}).")
    return viewer


def route_of(request: Request) -> str:
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


def begin(request: Request) -> None:
    rid = request.headers.get("x-request-id", "")
    request.ctx.rid = rid if 0 < len(rid) <= 64 and rid.isprintable() else new_id("req")
    request.ctx.token = request_id_var.set(request.ctx.rid)
    request.ctx.new_csrf = ""
    request.ctx.viewer = None
    request.ctx.started = time.perf_counter()


def finish(request: Request, resp: HTTPResponse, secure: bool) -> None:
    for name, value in SECURITY_HEADERS.items():
        resp.headers.setdefault(name, value)
    rid = getattr(request.ctx, "rid", "")
    if rid:
        resp.headers["X-Request-Id"] = rid
    new_csrf = getattr(request.ctx, "new_csrf", "")
    if new_csrf:
        set_cookie(resp, CSRF_COOKIE, new_csrf, secure)
    started = getattr(request.ctx, "started", None)
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
    token = getattr(request.ctx, "token", None)
    if token is not None:
        request_id_var.reset(token)
        request.ctx.token = None


def set_cookie(resp: HTTPResponse, name: str, value: str, secure: bool, max_age: int | None = None) -> None:
    resp.add_cookie(name, value, path="/", httponly=True, samesite="Lax", secure=secure, max_age=max_age)


def render(request: Request, template: str, status: int = 200, **context: Any) -> HTTPResponse:
    viewer: Viewer | None = request.ctx.viewer
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


def error_page(request: Request, error: PortalError) -> HTTPResponse:
    if request.headers.get("hx-request"):
        body = templates.get_template("_error.html").render(error=error, request_id=request.ctx.rid)
        return response.html(body, status=error.status)
    return render(request, "error.html", status=error.status, error=error)
