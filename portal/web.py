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
from sanic.exceptions import SanicException
from sanic.handlers import ErrorHandler
from sanic.log import error_logger
from sanic.response import BaseHTTPResponse, HTTPResponse

from portal import csrf, display, flash
from portal.access import refusal
from portal.context import PortalRequest, Viewer
from svckit import roles
from svckit.clients import ClientError
from svckit.clients.interceptors import session_token_var
from svckit.ids import new_id
from svckit.logs import request_id_var
from svckit.outage import RETRY_AFTER, OutageLog
from svckit.refusallog import RefusalLog
from svckit.vocabulary import Environment as Env

log = logging.getLogger("portal")
REFUSAL_LOG = RefusalLog(log)
# Requests failed by an outage the portal met itself (one line per 10 s with their count, svckit.outage).
OUTAGES = OutageLog(log)
UNAVAILABLE_PAGE = "A service behind the portal is unavailable; nothing was changed. Try again in a moment."

REQUESTS = Histogram(
    "portal_request_seconds",
    "Portal HTTP requests by route and status, server-side time",
    ["route", "status"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
SESSION_COOKIE = "portal_session"
CSRF_COOKIE = "portal_csrf"
HOST_PREFIX = "__Host-"
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
    # Templates never change under a running portal: no stat() of each file on every render.
    auto_reload=False,
)
templates.filters.update(display.FILTERS)
templates.globals.update(display.GLOBALS)


def cookie_name(name: str, secure: bool) -> str:
    """The name the session and CSRF cookies go by. On https, ``__Host-`` + name: the browser keeps such
    a cookie only if this host set it over https, Secure, with Path=/ and no Domain, so neither a sibling
    subdomain nor a plain-http answer (a network attacker's) can plant or overwrite it. On plain http
    (local development) the bare name: no browser takes a ``__Host-`` cookie without Secure there."""
    return HOST_PREFIX + name if secure else name


def cookie_of(request: PortalRequest, name: str) -> str:
    """The value of the session or CSRF cookie, by its exact name only (``cookie_name``): Sanic's own
    look-up would also take a prefixed cookie of the bare name, or the bare one of a prefixed name."""
    values = dict.get(request.cookies, cookie_name(name, request.app.ctx.secure)) or [""]
    return str(values[0])


def csrf_token(request: PortalRequest) -> str:
    """The token this request's forms carry (portal.csrf): the session's when signed in, else the one of
    the browser's nonce cookie (made now, and set on the response, when it has none)."""
    viewer = request.ctx.viewer
    if viewer is not None:
        return csrf.token(request.app.ctx.csrf_key, viewer.session_id, "")
    nonce = cookie_of(request, CSRF_COOKIE) or request.ctx.new_csrf
    if not nonce:
        nonce = request.ctx.new_csrf = secrets.token_urlsafe(32)
    return csrf.token(request.app.ctx.csrf_key, "", nonce)


def check_csrf(request: PortalRequest) -> None:
    """Every state-changing request carries its token (form field ``csrf`` or the X-CSRF-Token header)."""
    viewer = request.ctx.viewer
    sent = (request.form.get("csrf") if request.form else None) or request.headers.get("x-csrf-token", "")
    session_id = viewer.session_id if viewer is not None else ""
    nonce = "" if viewer is not None else cookie_of(request, CSRF_COOKIE)
    planted = viewer is None and csrf.cross_origin(
        request.headers.get("sec-fetch-site", ""), request.headers.get("origin", ""), request.host
    )
    if planted or not csrf.valid(request.app.ctx.csrf_key, session_id, nonce, str(sent)):
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


class PageError:
    """An error the portal shows that no peer raised (the same fields as a ClientError)."""

    def __init__(self, status: int, type: str, message: str) -> None:
        self.status, self.type, self.message = status, type, message


class RouteErrorHandler(ErrorHandler):
    """Sanic's handler logs the whole URL of a request that raised, and a portal URL can hold a secret
    (the invitation token of /invite/<token>): this one logs the method and route template instead.
    Whatever Sanic would answer itself (an unknown URL, a method the route lacks, an exception of a
    handler) is the portal's own error page instead, with the request id and no inline script."""

    def default(self, request: Request, exception: Exception) -> HTTPResponse:
        portal_request: PortalRequest = request  # type: ignore[assignment]
        if not portal_request.ctx.rid:
            begin(portal_request)
        # An outage (svckit.outage.classify) is counted and summarised once per interval, not logged
        # with a traceback per request, and answered 503 like a peer's.
        outage = None if isinstance(exception, SanicException) else OUTAGES.count(exception)
        if outage is None:
            self.log(request, exception)
        status = exception.status_code if isinstance(exception, SanicException) else 500
        if outage is not None:
            error = PageError(503, "service_unavailable", UNAVAILABLE_PAGE)
        elif status == 404:
            error = PageError(404, "not_found", "There is no page at this address.")
        elif status < 500:
            error = PageError(status, "invalid_request", "The portal cannot answer this request.")
        else:
            error = PageError(500, "internal_error", "Something went wrong on our side; nothing was shown.")
        return error_page(portal_request, error)

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
    # No session until load() has read the cookie: authsvc and webhookd answer the portal for its
    # signed-in user only (svckit.portal_calls).
    request.ctx.session_token = session_token_var.set("")
    request.ctx.new_csrf = ""
    request.ctx.viewer = None
    request.ctx.started = time.perf_counter()
    request.ctx.drop_cookies = []


def finish(request: PortalRequest, resp: BaseHTTPResponse, secure: bool) -> None:
    for name, value in SECURITY_HEADERS.items():
        resp.headers.setdefault(name, value)
    ctx = request.ctx
    if ctx.rid:
        resp.headers["X-Request-Id"] = ctx.rid
    if ctx.new_csrf:
        set_cookie(resp, CSRF_COOKIE, ctx.new_csrf, secure)
    for name, path in ctx.drop_cookies:
        # The flash this answer showed: gone with this answer (same name, path and attributes).
        resp.add_cookie(name, "", path=path, httponly=True, samesite="Strict", secure=secure, max_age=0)
    ctx.drop_cookies = []
    started = ctx.started
    if started is not None:
        elapsed = time.perf_counter() - started
        route = route_of(request)
        REQUESTS.labels(route, str(resp.status)).observe(elapsed)
        kind = refusal(resp.status, ctx.viewer is not None, resp.headers.get("location", ""))
        if kind is not None:
            REFUSAL_LOG.add(kind)  # counted, at most a line a second: a flood is no flood of lines
        else:
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
    if ctx.session_token is not None:
        session_token_var.reset(ctx.session_token)
        ctx.session_token = None


def set_cookie(
    resp: BaseHTTPResponse, name: str, value: str, secure: bool, max_age: int | None = None
) -> None:
    """The session or CSRF cookie ``name`` (``cookie_name``: ``__Host-`` on https)."""
    resp.add_cookie(
        name,
        value,
        path="/",
        httponly=True,
        samesite="Lax",
        secure=secure,
        max_age=max_age,
        host_prefix=secure,
    )


def delete_cookie(resp: BaseHTTPResponse, name: str, secure: bool) -> None:
    set_cookie(resp, name, "", secure, max_age=0)


def signed_in(request: PortalRequest, token: str, to: str = "/live/", notice: str = "") -> HTTPResponse:
    """The answer to a sign-in (or a password change): the new session's cookie, then ``to``."""
    resp = response.redirect(to, status=303)
    set_cookie(resp, SESSION_COOKIE, token, request.app.ctx.secure)
    if notice:
        _set_flash(request, resp, flash.NOTICE_COOKIE, to, {"m": notice}, token)
    return resp


def _path_of(to: str) -> str:
    return to.split("?", 1)[0].split("#", 1)[0]


def _set_flash(
    request: PortalRequest, resp: BaseHTTPResponse, cookie: str, to: str, payload: dict[str, Any], token: str
) -> None:
    """A flash for the page ``to``: sealed for the session ``token``, in a cookie only that page gets."""
    path = _path_of(to)
    value = flash.seal(request.app.ctx.flash_key, token, cookie, {**payload, "p": path})
    resp.add_cookie(
        cookie,
        value,
        path=path,
        httponly=True,
        samesite="Strict",
        secure=request.app.ctx.secure,
        max_age=flash.TTL,
    )


def redirect(request: PortalRequest, to: str, notice: str = "") -> HTTPResponse:
    """The answer to a form that changed something: 303 to the page ``to`` (Post/Redirect/Get), which
    shows ``notice`` once."""
    resp = response.redirect(to, status=303)
    if notice:
        _set_flash(request, resp, flash.NOTICE_COOKIE, to, {"m": notice}, viewer_of(request).session_token)
    return resp


def redirect_with_secret(
    request: PortalRequest, to: str, kind: str, object_id: str, secret: str, notice: str = ""
) -> HTTPResponse:
    """303 to the page ``to`` that shows ``secret`` once (``take_secret``): never in the URL, only in a
    sealed cookie of that page's path."""
    resp = redirect(request, to, notice)
    payload = {"k": kind, "id": object_id, "s": secret}
    _set_flash(request, resp, flash.SECRET_COOKIE, to, payload, viewer_of(request).session_token)
    return resp


def _take(request: PortalRequest, cookie: str) -> dict[str, Any] | None:
    """The flash ``cookie`` of this page, sealed for this session; the cookie is deleted in the answer
    either way (a flash is read once), and a secret's is spent (shown once, even if sent again)."""
    viewer = request.ctx.viewer
    values = request.cookies.getlist(cookie) or []
    if not values or viewer is None:
        return None
    # This page's cookie goes with this answer, whatever it holds; one of a parent path (the browser
    # sends those too) is not this page's and waits for its own.
    if (cookie, request.path) not in request.ctx.drop_cookies:
        request.ctx.drop_cookies.append((cookie, request.path))
    for value in values:
        payload = flash.unseal(request.app.ctx.flash_key, viewer.session_token, cookie, value)
        if payload is not None and payload.get("p") == request.path:
            if cookie == flash.SECRET_COOKIE and not request.app.ctx.spent.first_view(
                flash.sealed_id(value), int(payload["exp"]), time.time()
            ):
                return None
            return payload
    return None


def take_secret(request: PortalRequest, kind: str, object_id: str) -> str:
    """The secret the POST before this page left for it ("" when there is none: already shown, expired,
    or not this session's)."""
    payload = _take(request, flash.SECRET_COOKIE)
    if payload is None or payload.get("k") != kind or payload.get("id") != object_id:
        return ""
    return str(payload.get("s", ""))


def render(request: PortalRequest, template: str, status: int = 200, **context: Any) -> HTTPResponse:
    viewer = request.ctx.viewer
    if request.method == "GET" and not request.headers.get("hx-request") and "notice" not in context:
        got = _take(request, flash.NOTICE_COOKIE) if request.cookies.get(flash.NOTICE_COOKIE) else None
        context["notice"] = str(got.get("m", "")) if got else ""
    # The page's environment; a page no route matched (the 404 page) takes its URL's first segment.
    env = (
        context.pop("env", None)
        or request.match_info.get("env")
        or request.path.partition("/")[2].partition("/")[0]
    )
    if env not in ENVIRONMENTS:
        env = "live"
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


def error_page(request: PortalRequest, error: ClientError | PageError) -> HTTPResponse:
    if request.headers.get("hx-request"):
        body = templates.get_template("_error.html").render(error=error, request_id=request.ctx.rid)
        page = response.html(body, status=error.status)
    else:
        page = render(request, "error.html", status=error.status, error=error)
    if error.status == 503:  # an outage: when to try again, as the edge says it
        page.headers["Retry-After"] = str(RETRY_AFTER)
    return page
