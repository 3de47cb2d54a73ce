"""Signing in and out, and joining through an invitation: the only pages without a session."""

from __future__ import annotations

import math

from sanic import Blueprint, response
from sanic.response import HTTPResponse

from portal.context import PortalRequest, auth
from portal.forms import fields
from portal.signin_limit import limiter_of
from portal.web import SESSION_COOKIE, check_csrf, cookie_of, delete_cookie, render, signed_in, viewer_of
from svckit.clients import ClientError
from travel.auth.v1 import identity_pb2 as ipb

bp = Blueprint("portal_session")

TOO_MANY_ATTEMPTS = "Too many sign-in attempts from your network; try again in a few minutes."
# Seconds a sign-in refused by authsvc (429) is told to wait: its hashing queue's shed time.
AUTHSVC_RETRY_AFTER = 5


@bp.get("/signin")
async def signin_form(request: PortalRequest) -> HTTPResponse:
    return render(request, "signin.html", email="", need_totp=False)


@bp.post("/signin")
async def signin(request: PortalRequest) -> HTTPResponse:
    check_csrf(request)
    form = fields(request)
    email = form.get("email", "")
    # Per source address, before authsvc is asked (portal.signin_limit): a flood hashes nothing.
    wait = limiter_of(request.app.ctx).attempt(request.ip or "")
    if wait:
        page = render(
            request,
            "signin.html",
            status=429,
            email=email,
            need_totp=False,
            errors={"form": TOO_MANY_ATTEMPTS},
        )
        page.headers["Retry-After"] = str(math.ceil(wait))
        return page
    try:
        got = await auth(request).sign_in(
            ipb.SignInRequest(
                email=email,
                password=form.get("password", ""),
                totp_code=form.get("totp_code", ""),
                source_address=request.ip or "",
                user_agent=request.headers.get("user-agent", "")[:300],
            ),
        )
    except ClientError as exc:
        if exc.status in (400, 401, 429):
            need_totp = exc.type == "second_factor_required"
            errors = {"totp_code" if need_totp else "form": exc.message}
            page = render(
                request, "signin.html", status=exc.status, email=email, need_totp=need_totp, errors=errors
            )
            if exc.status == 429:  # authsvc's throttle or global budget; its wait is not passed on
                page.headers["Retry-After"] = str(AUTHSVC_RETRY_AFTER)
            return page
        raise
    # A fresh session id on every sign-in; an old cookie is simply replaced.
    old = cookie_of(request, SESSION_COOKIE)
    if old:
        await auth(request).sign_out(ipb.SignOutRequest(session_token=old))
    return signed_in(request, got.session_token)


@bp.post("/signout")
async def signout(request: PortalRequest) -> HTTPResponse:
    await auth(request).sign_out(ipb.SignOutRequest(session_token=viewer_of(request).session_token))
    resp = response.redirect("/signin", status=303)
    delete_cookie(resp, SESSION_COOKIE, request.app.ctx.secure)
    return resp


@bp.get("/invite/<token:str>")
async def invite_form(request: PortalRequest, token: str) -> HTTPResponse:
    return render(request, "invite.html", token=token)


@bp.post("/invite/<token:str>")
async def invite_accept(request: PortalRequest, token: str) -> HTTPResponse:
    check_csrf(request)
    try:
        got = await auth(request).accept_invite(
            ipb.AcceptInviteRequest(
                token=token,
                password=fields(request).get("password", ""),
                source_address=request.ip or "",
                user_agent=request.headers.get("user-agent", "")[:300],
            ),
        )
    except ClientError as exc:
        if exc.status in (400, 401, 409):
            return render(
                request,
                "invite.html",
                status=exc.status,
                token=token,
                errors={exc.field or "form": exc.message},
            )
        raise
    return signed_in(request, got.session_token)
