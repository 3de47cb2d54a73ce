"""Notifications: who the account's alert e-mails (a webhook endpoint failing, disabled) go to. The portal
owners and admins always do (shown, not editable here: the Users page changes them); the extra
addresses the account sets (authsvc's ``Account.admin_emails``) are added and removed here. Owners and
admins only (``notifications.manage``). Every change is an UpdateAccount, which authsvc audits
(``account.updated`` with the addresses before and after), and answers 303 to the page, which says once
what it did; a refused address is shown beside the field."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any, Literal

from google.protobuf import field_mask_pb2
from sanic import Blueprint
from sanic.response import HTTPResponse

from portal.context import PortalRequest, Viewer, auth
from portal.forms import fields
from portal.web import env_of, need, redirect, render
from svckit.clients import ClientError
from travel.auth.v1 import auth_pb2 as apb

bp = Blueprint("portal_notifications")

# authsvc's limits on Account.admin_emails (authsvc/_validate.py): the same answer here, beside the field.
MAX_EXTRA = 20
MAX_EMAIL = 254
EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
FIELD = "email"

Change = Literal["add", "remove"]


@dataclasses.dataclass(frozen=True, slots=True)
class ExtraChange:
    """The extra addresses after a change, and what the page says once; or why it is refused."""

    addresses: tuple[str, ...] = ()
    notice: str = ""
    problem: str = ""


def extra_change(extra: Sequence[str], portal: Sequence[str], change: Change, typed: str) -> ExtraChange:
    """Add ``typed`` to the account's ``extra`` addresses, or remove it. Addresses compare
    case-insensitively; an owner's or admin's own address is alerted already (``portal``)."""
    address = typed.strip()
    key = address.casefold()
    present = [a for a in extra if a.casefold() == key]
    if change == "remove":
        if not present:
            return ExtraChange(problem=f"{address or 'that address'} is not one of the extra addresses")
        return ExtraChange(
            tuple(a for a in extra if a.casefold() != key),
            f"{present[0]} no longer receives alert e-mails.",
        )
    if not address:
        return ExtraChange(problem="enter an e-mail address")
    if len(address) > MAX_EMAIL or not EMAIL.match(address):
        return ExtraChange(problem=f"{address[:60]} is not an e-mail address")
    if present:
        return ExtraChange(problem=f"{present[0]} already receives alert e-mails")
    if key in {p.casefold() for p in portal}:
        return ExtraChange(problem=f"{address} already receives alert e-mails as a portal owner or admin")
    if len(extra) >= MAX_EXTRA:
        return ExtraChange(problem=f"at most {MAX_EXTRA} extra addresses; remove one first")
    return ExtraChange((*extra, address), f"{address} now receives alert e-mails.")


@dataclasses.dataclass(frozen=True, slots=True)
class Recipients:
    portal: tuple[str, ...]
    extra: tuple[str, ...]


async def recipients(request: PortalRequest, viewer: Viewer) -> Recipients:
    account_id = viewer.user.account_id
    found = await auth(request).get_alert_recipients(apb.GetAlertRecipientsRequest(account_id=account_id))
    account = (await auth(request).get_account(apb.GetAccountRequest(account_id=account_id))).account
    return Recipients(tuple(found.portal_recipients), tuple(account.admin_emails))


async def notifications_page(request: PortalRequest, status: int = 200, **extra: Any) -> HTTPResponse:
    viewer = need(request, "notifications.manage")
    got = await recipients(request, viewer)
    return render(
        request,
        "notifications.html",
        status=status,
        portal_recipients=got.portal,
        extra_addresses=got.extra,
        max_extra=MAX_EXTRA,
        form=extra.pop("form", {}),
        **extra,
    )


@bp.get("/<env:str>/notifications")
async def notifications(request: PortalRequest, env: str) -> HTTPResponse:
    env_of(request)
    return await notifications_page(request)


async def change_extra(request: PortalRequest, change: Change) -> HTTPResponse:
    env = env_of(request)
    viewer = need(request, "notifications.manage")
    typed = fields(request).get(FIELD)
    got = await recipients(request, viewer)
    decided = extra_change(got.extra, got.portal, change, typed)
    # A refused address is shown beside the add form's field; a refused removal above the page.
    form, where = ({FIELD: typed}, FIELD) if change == "add" else ({}, "form")
    if decided.problem:
        return await notifications_page(request, 400, errors={where: decided.problem}, form=form)
    user = viewer.user
    try:
        await auth(request).update_account(
            apb.UpdateAccountRequest(
                account_id=user.account_id,
                update_mask=field_mask_pb2.FieldMask(paths=["admin_emails"]),
                admin_emails=list(decided.addresses),
                actor=apb.Actor(user=user.email, source_address=request.ip or "", user_id=user.id),
            )
        )
    except ClientError as exc:
        if exc.status != 400:
            raise
        return await notifications_page(request, 400, errors={where: exc.message}, form=form)
    return redirect(request, f"/{env}/notifications", decided.notice)


@bp.post("/<env:str>/notifications/add")
async def add_extra(request: PortalRequest, env: str) -> HTTPResponse:
    return await change_extra(request, "add")


@bp.post("/<env:str>/notifications/remove")
async def remove_extra(request: PortalRequest, env: str) -> HTTPResponse:
    return await change_extra(request, "remove")
