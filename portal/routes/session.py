"""Signing in and out, and joining through an invitation: the only pages without a session."""

from __future__ import annotations

import functools
import math

from markupsafe import escape
from sanic import Blueprint, response
from sanic.response import HTTPResponse

from portal.context import PortalRequest, auth
from portal.forms import fields
from portal.invites import invite_page
from portal.signin_limit import limiter_of
from portal.web import (
    SESSION_COOKIE,
    check_csrf,
    cookie_of,
    csrf_token,
    delete_cookie,
    render,
    signed_in,
    templates,
    viewer_of,
)
from svckit.clients import ClientError
from travel.auth.v1 import identity_pb2 as ipb

bp = Blueprint("portal_session")

SIGNIN_PATH = "/signin"
TOO_MANY_ATTEMPTS = "Too many sign-in attempts from your network; try again in a few minutes."
# Seconds a sign-in refused by authsvc (429) is told to wait: its hashing queue's shed time.
AUTHSVC_RETRY_AFTER = 5


@bp.get("/signin")
async def signin_form(request: PortalRequest) -> HTTPResponse:
    return render(request, "signin.html", email="", need_totp=False)


def too_many(request: PortalRequest, wait: float, email: str = "") -> HTTPResponse:
    """The sign-in page again, 429 with Retry-After: the attempt was not made."""
    page = render(
        request, "signin.html", status=429, email=email, need_totp=False, errors={"form": TOO_MANY_ATTEMPTS}
    )
    page.headers["Retry-After"] = str(math.ceil(wait))
    return page


_CSRF_MARK, _RID_MARK = "\x00csrf\x00", "\x00rid\x00"


@functools.cache
def throttled_page() -> tuple[str, ...]:
    """The page ``too_many`` renders for POST /signin with no e-mail, rendered once and cut where the
    CSRF token and the request id go (all that differs between two of them): pieces of text, then a
    mark, alternately."""
    page = templates.get_template("signin.html").render(
        viewer=None,
        env="live",
        other_env="sandbox",
        switch_url="/sandbox/",
        csrf=_CSRF_MARK,
        request_id=_RID_MARK,
        path=SIGNIN_PATH,
        errors={"form": TOO_MANY_ATTEMPTS},
        email="",
        need_totp=False,
    )
    pieces: list[str] = []
    for i, part in enumerate(page.split(_CSRF_MARK)):
        if i:
            pieces.append(_CSRF_MARK)
        for j, text in enumerate(part.split(_RID_MARK)):
            if j:
                pieces.append(_RID_MARK)
            pieces.append(text)
    return tuple(pieces)


def throttled(request: PortalRequest) -> HTTPResponse | None:
    """A sign-in from a source (its network, or everyone) already past its limit: the 429 before its form
    is parsed or its CSRF token checked (``lifecycle.load`` asks first), from a page rendered once, so
    each request of a flood costs the portal the least it can; None when an attempt would be allowed.
    It counts nothing: only an attempt with a valid token is counted (``signin``)."""
    wait = limiter_of(request.app.ctx).wait(request.ip or "")
    if wait <= 0:
        return None
    fill = {_CSRF_MARK: csrf_token(request), _RID_MARK: str(escape(request.ctx.rid))}
    page = response.html("".join(fill.get(piece, piece) for piece in throttled_page()), status=429)
    page.headers["Retry-After"] = str(math.ceil(wait))
    return page


@bp.post("/signin")
async def signin(request: PortalRequest) -> HTTPResponse:
    check_csrf(request)
    form = fields(request)
    email = form.get("email", "")
    # Per source address, before authsvc is asked (portal.signin_limit): a flood hashes nothing.
    wait = limiter_of(request.app.ctx).attempt(request.ip or "")
    if wait:
        return too_many(request, wait, email)
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
    return render(request, "invite.html", token=token, **invite_page(request, token))


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
                **invite_page(request, token),
                errors={exc.field or "form": exc.message},
            )
        raise
    return signed_in(request, got.session_token)
