"""What every request goes through: the signed-in user loaded from authsvc (or a redirect to sign in),
the CSRF check of every POST, the TOTP enrolment rule, headers, and a ClientError as a page (a peer's
error, or one the portal raises itself for its own refusals)."""

from __future__ import annotations

import re

from sanic import response
from sanic.response import BaseHTTPResponse, HTTPResponse

from portal.access import access
from portal.context import PortalApp, PortalRequest, Viewer, auth
from portal.routes.session import SIGNIN_PATH, throttled
from portal.web import ENVIRONMENTS, SESSION_COOKIE, begin, check_csrf, cookie_of, error_page, finish
from svckit.clients import ClientError
from svckit.clients.interceptors import session_token_var
from svckit.connguard import accepted as connection_accepted
from svckit.connguard import refused as connection_refused
from travel.auth.v1 import identity_pb2 as ipb

# What a user who must enrol in TOTP may still open: its own page, the enrolment, sign-out.
ENROLMENT_PATH = re.compile(r"^/(live|sandbox)/me(/totp|/totp-confirm)?$|^/signout$")


async def load(request: PortalRequest) -> HTTPResponse | None:
    begin(request)
    # Public routes are matched whole (portal.access): never a prefix of a page's path.
    need = access(request.method, request.path)
    if need.root:
        return response.redirect("/live/" if cookie_of(request, SESSION_COOKIE) else "/signin")
    if not need.session:
        if need.csrf:
            if request.path == SIGNIN_PATH:
                refused = throttled(request)  # before the form is read: a flood's cheapest answer
                if refused is not None:
                    return refused
            check_csrf(request)  # signed out: the token of the browser's nonce (the handler checks too)
        return None
    token = cookie_of(request, SESSION_COOKIE)
    # Every call to authsvc and webhookd from here on is made for this session's user.
    session_token_var.set(token)
    # A /<env>/... route whose first segment is no environment (/favicon.ico.bak, /healthz/keys/key_x) is
    # no page either: answered 404 here, its handler never runs.
    no_env = request.route is not None and request.match_info.get("env", "live") not in ENVIRONMENTS
    if request.route is None or no_env:
        # No such page: the portal's 404 page, with the menu when signed in.
        if token:
            try:
                got = await auth(request).get_session(ipb.GetSessionRequest(session_token=token))
            except ClientError:
                got = None
            if got is not None:
                request.ctx.viewer = Viewer(got.user, token, got.session.id)
        if no_env:
            raise ClientError("not_found", "There is no page at this address.")
        return None
    try:
        got = await auth(request).get_session(ipb.GetSessionRequest(session_token=token))
    except ClientError as exc:
        if exc.status == 401:
            if request.method == "GET" and not request.headers.get("hx-request"):
                return response.redirect("/signin")
            raise ClientError("session_expired", "Your session has ended; sign in again.") from None
        raise
    request.ctx.viewer = Viewer(
        got.user, token, got.session.id, got.totp_enrolment_required, got.account_requires_totp
    )
    if need.csrf:
        check_csrf(request)
    if got.totp_enrolment_required and not ENROLMENT_PATH.match(request.path):
        if request.method == "GET":
            env = request.path.split("/")[1]
            return response.redirect(f"/{env if env in ENVIRONMENTS else 'live'}/me", status=303)
        raise ClientError("forbidden", "Your account requires two-factor sign-in: set it up first.")
    return None


async def headers(request: PortalRequest, resp: BaseHTTPResponse) -> None:
    ctx = request.app.ctx
    finish(request, resp, ctx.secure)
    signed_in = request.ctx.viewer is not None
    # A session keeps its connection's keep-alive and trusts its address; a connection without one ends
    # with its first refusal (svckit.connlimits).
    if signed_in:
        connection_accepted(request)
    else:
        connection_refused(request, resp.status, False)
    # Past its source's allowance a refusal is written later (svckit.pacing): a flood slowed.
    wait = ctx.pacer.refusal(request, request.ip or "", resp.status, signed_in)
    if wait is not None:
        await wait


async def client_error(request: PortalRequest, exc: ClientError) -> HTTPResponse:
    if not request.ctx.rid:
        begin(request)
    return error_page(request, exc)


async def close(app: PortalApp) -> None:
    await app.ctx.auth.close()
    await app.ctx.hooks.close()
