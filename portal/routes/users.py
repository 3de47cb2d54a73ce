"""The account's users: the list, the sign-in rule (TOTP for owners and admins), invitations, and a
user's role and removal (asked first, on its own page). Every change answers 303 to the list, which says
what it did once."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from sanic import Blueprint
from sanic.response import HTTPResponse

from portal.context import PortalRequest, Viewer, auth
from portal.forms import fields, number_of
from portal.invites import invite_link
from portal.mail import send_mail
from portal.pages import PAGE_SIZE, Listing, list_page
from portal.web import env_of, need, redirect, render
from svckit.clients import ClientError
from svckit.prototables import USER_ROLE
from svckit.smtp import MailRefused, MailUnreachable
from svckit.vocabulary import UserRole
from travel.auth.v1 import auth_pb2 as apb
from travel.auth.v1 import identity_pb2 as ipb

log = logging.getLogger("portal.users")

bp = Blueprint("portal_users")
ROLES = [role.value for role in UserRole]
# (request, the signed-in user, user_id) -> what the list says once done
UserAction = Callable[[PortalRequest, Viewer, str], Awaitable[str]]


async def users_page(request: PortalRequest, status: int = 200, **extra: Any) -> HTTPResponse:
    viewer = need(request, "users.read")

    async def fetch() -> Listing:
        page = await auth(request).list_users(
            ipb.ListUsersRequest(
                session_token=viewer.session_token,
                page_size=PAGE_SIZE,
                page_token=request.args.get("page", ""),
            ),
        )
        return Listing(page.users, page.next_page_token)

    return await list_page(request, "users.html", "users", fetch, status, roles=ROLES, **extra)


def user_action(handler: UserAction) -> Callable[..., Awaitable[HTTPResponse]]:
    """A change to another user (users.manage): a refusal is shown on the list, beside that user."""

    async def route(request: PortalRequest, env: str, user_id: str) -> HTTPResponse:
        env = env_of(request)
        viewer = need(request, "users.manage")
        try:
            notice = await handler(request, viewer, user_id)
        except ClientError as exc:
            if exc.status not in (400, 403, 409):
                raise
            return await users_page(request, exc.status, errors={user_id: exc.message})
        return redirect(request, f"/{env}/users", notice)

    route.__name__ = handler.__name__
    route.__doc__ = handler.__doc__
    return route


@bp.get("/<env:str>/users")
async def users(request: PortalRequest, env: str) -> HTTPResponse:
    env_of(request)
    return await users_page(request)


@bp.post("/<env:str>/users/security")
async def security(request: PortalRequest, env: str) -> HTTPResponse:
    env = env_of(request)
    viewer = need(request, "account.security")
    await auth(request).set_totp_requirement(
        ipb.SetTotpRequirementRequest(
            session_token=viewer.session_token,
            required=fields(request).get("require_totp") == "on",
            source_address=request.ip or "",
        ),
    )
    return redirect(request, f"/{env}/users", "Sign-in rules saved.")


@bp.post("/<env:str>/users/invite")
async def invite(request: PortalRequest, env: str) -> HTTPResponse:
    env = env_of(request)
    viewer = need(request, "users.manage")
    config = request.app.ctx.settings
    email = fields(request).get("email", "")
    role = number_of(USER_ROLE, fields(request).get("role"))
    try:
        made = await auth(request).create_invite(
            ipb.CreateInviteRequest(
                email=email,
                role=role,
                session_token=viewer.session_token,
                actor=apb.Actor(user=viewer.user.email, source_address=request.ip or ""),
            ),
        )
    except ClientError as exc:
        if exc.status not in (400, 403, 409):
            raise
        return await users_page(request, exc.status, errors={exc.field or "form": exc.message})
    link = invite_link(request, config.public_url, made.token, made.invite.email)
    why = "No mail server is configured"
    if config.smtp is not None:
        try:
            await send_mail(
                config.smtp,
                made.invite.email,
                "You are invited to the svc partner portal",
                f"{viewer.user.email} invited you to the svc partner portal.\n\nSet your password here "
                f"(the link works once, for 7 days):\n{link}\n",
            )
            return redirect(request, f"/{env}/users", f"Invitation sent to {made.invite.email}.")
        except (MailUnreachable, MailRefused) as exc:  # the invitation exists: hand its link over instead
            log.warning("invitation e-mail failed", extra={"error": str(exc)})
            why = "The mail server did not take the invitation"
    # The link holds the invitation's token: it travels sealed like every flash, never in a URL.
    return redirect(
        request,
        f"/{env}/users",
        f"{why}; give {made.invite.email} this link (it works once): {link}",
    )


@bp.post("/<env:str>/users/<user_id:str>/role")
@user_action
async def set_role(request: PortalRequest, viewer: Viewer, user_id: str) -> str:
    got = await auth(request).set_user_role(
        ipb.SetUserRoleRequest(
            session_token=viewer.session_token,
            user_id=user_id,
            role=number_of(USER_ROLE, fields(request).get("role")),
            source_address=request.ip or "",
        ),
    )
    return f"Role changed: {got.user.email} is now {USER_ROLE.get(got.user.role)}."


async def find_user(request: PortalRequest, viewer: Viewer, user_id: str) -> ipb.User:
    """A user of the viewer's account, by id (the list, page by page)."""
    token = ""
    for _ in range(100):
        page = await auth(request).list_users(
            ipb.ListUsersRequest(session_token=viewer.session_token, page_size=100, page_token=token),
        )
        for user in page.users:
            if user.id == user_id:
                return user
        token = page.next_page_token
        if not token:
            break
    raise ClientError("not_found", "No such user.")


@bp.get("/<env:str>/users/<user_id:str>/remove")
async def confirm_remove(request: PortalRequest, env: str, user_id: str) -> HTTPResponse:
    """Removing asks first: this page's form is the one that removes."""
    env = env_of(request)
    viewer = need(request, "users.manage")
    user = await find_user(request, viewer, user_id)
    return render(
        request,
        "confirm.html",
        title=f"Remove {user.email}?",
        action=f"/{env}/users/{user.id}/remove",
        hidden={},
        explain=f"{user.email} is signed out everywhere at once and can no longer sign in. To let them "
        "back in, invite them again.",
        button="Remove user",
        cancel=f"/{env}/users",
    )


@bp.post("/<env:str>/users/<user_id:str>/remove")
@user_action
async def remove_user(request: PortalRequest, viewer: Viewer, user_id: str) -> str:
    await auth(request).remove_user(
        ipb.RemoveUserRequest(
            session_token=viewer.session_token, user_id=user_id, source_address=request.ip or ""
        ),
    )
    return "User removed."


@bp.post("/<env:str>/users/<user_id:str>/<action:str>")
async def no_user_action(request: PortalRequest, env: str, user_id: str, action: str) -> HTTPResponse:
    """Any other change: refused as it always was, after the session, CSRF and role checks."""
    env_of(request)
    need(request, "users.manage")
    raise ClientError("not_found", "No such action.")
