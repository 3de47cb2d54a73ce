"""The own page: password, TOTP enrolment and removal, and the user's sessions. Every form answers 303
to the page, which says once what it did; the enrolment's QR code and setup key reach it through a
sealed flash like any secret shown once."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from sanic import Blueprint
from sanic.response import HTTPResponse

from portal import totp
from portal.context import PortalRequest, auth
from portal.forms import fields
from portal.pages import Listing, list_page
from portal.web import env_of, redirect, redirect_with_secret, signed_in, take_secret, viewer_of
from svckit.clients import ClientError
from travel.auth.v1 import identity_pb2 as ipb

bp = Blueprint("portal_me")
# (request, env) -> the answer, or what the own page says once done.
MeAction = Callable[[PortalRequest, str], Awaitable[HTTPResponse | str]]


async def me_page(request: PortalRequest, status: int = 200, **extra: Any) -> HTTPResponse:
    viewer = viewer_of(request)

    async def fetch() -> Listing:
        got = await auth(request).list_sessions(ipb.ListSessionsRequest(session_token=viewer.session_token))
        return Listing(got.sessions, context={"current": got.current_session_id})

    return await list_page(request, "me.html", "sessions", fetch, status, **extra)


def me_action(form_name: str) -> Callable[[MeAction], Callable[..., Awaitable[HTTPResponse]]]:
    """A form of the own page: a refusal is shown on the page (400), beside its field or else beside
    the form ``form_name``; an ended session is not a refusal but a sign-in again."""

    def decorate(handler: MeAction) -> Callable[..., Awaitable[HTTPResponse]]:
        async def route(request: PortalRequest, env: str) -> HTTPResponse:
            env = env_of(request)
            try:
                resp = await handler(request, env)
            except ClientError as exc:
                if exc.status not in (400, 401, 409) or exc.type == "session_expired":
                    raise
                return await me_page(request, 400, errors={exc.field or form_name: exc.message})
            return redirect(request, f"/{env}/me", resp) if isinstance(resp, str) else resp

        route.__name__ = handler.__name__
        route.__doc__ = handler.__doc__
        return route

    return decorate


@bp.get("/<env:str>/me")
async def me(request: PortalRequest, env: str) -> HTTPResponse:
    env_of(request)
    uri = take_secret(request, "totp", viewer_of(request).user.id)
    if uri:
        qr, totp_key = totp.enrolment(uri)
        return await me_page(request, qr=qr, totp_key=totp_key)
    return await me_page(request)


@bp.post("/<env:str>/me/password")
@me_action("password")
async def change_password(request: PortalRequest, env: str) -> HTTPResponse | str:
    form = fields(request)
    got = await auth(request).change_password(
        ipb.ChangePasswordRequest(
            session_token=viewer_of(request).session_token,
            current_password=form.get("current_password", ""),
            new_password=form.get("new_password", ""),
            source_address=request.ip or "",
            user_agent=request.headers.get("user-agent", "")[:300],
        ),
    )
    return signed_in(
        request, got.session_token, f"/{env}/me", "Password changed; your other sessions are signed out."
    )


@bp.post("/<env:str>/me/totp")
@me_action("totp")
async def begin_totp(request: PortalRequest, env: str) -> HTTPResponse | str:
    viewer = viewer_of(request)
    begun = await auth(request).begin_totp_enrollment(
        ipb.BeginTotpEnrollmentRequest(
            session_token=viewer.session_token, current_code=fields(request).get("current_code", "")
        ),
    )
    return redirect_with_secret(request, f"/{env}/me", "totp", viewer.user.id, begun.provisioning_uri)


@bp.post("/<env:str>/me/totp-confirm")
@me_action("totp-confirm")
async def confirm_totp(request: PortalRequest, env: str) -> HTTPResponse | str:
    await auth(request).confirm_totp_enrollment(
        ipb.ConfirmTotpEnrollmentRequest(
            session_token=viewer_of(request).session_token, code=fields(request).get("code", "")
        ),
    )
    return "Two-factor sign-in is on."


@bp.post("/<env:str>/me/totp-remove")
@me_action("totp-remove")
async def remove_totp(request: PortalRequest, env: str) -> HTTPResponse | str:
    try:
        await auth(request).disable_totp(
            ipb.DisableTotpRequest(
                session_token=viewer_of(request).session_token,
                password=fields(request).get("totp_password", ""),
                source_address=request.ip or "",
            ),
        )
    except ClientError as exc:
        if exc.status not in (400, 401, 409) or exc.type == "session_expired":
            raise
        # The refusal's own status, beside the password field.
        return await me_page(request, exc.status, errors={"totp_password": exc.message})
    return "Two-factor sign-in is off."


@bp.post("/<env:str>/me/revoke-session")
@me_action("revoke-session")
async def revoke_session(request: PortalRequest, env: str) -> HTTPResponse | str:
    await auth(request).revoke_session(
        ipb.RevokeSessionRequest(
            session_token=viewer_of(request).session_token, session_id=fields(request).get("session_id", "")
        ),
    )
    return "Session ended."


@bp.post("/<env:str>/me/<action:str>")
async def no_me_action(request: PortalRequest, env: str, action: str) -> HTTPResponse:
    """Any other form: refused as it always was."""
    env_of(request)
    raise ClientError("not_found", "No such action.")
