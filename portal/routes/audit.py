"""GET /<env>/audit: the account's audit trail, newest first, filtered by key, user, action and time."""

from __future__ import annotations

from sanic import Blueprint
from sanic.response import HTTPResponse

from portal.context import PortalRequest, auth
from portal.forms import when
from portal.pages import PAGE_SIZE, Listing, list_page
from portal.web import need
from travel.auth.v1 import auth_pb2 as apb

bp = Blueprint("portal_audit")


@bp.get("/<env:str>/audit")
async def audit(request: PortalRequest, env: str) -> HTTPResponse:
    viewer = need(request, "audit.read")
    a = request.args
    q = {k: a.get(k, "") for k in ("key_id", "user_id", "action", "since", "until")}

    async def fetch() -> Listing:
        page = await auth(request).list_audit_events(
            apb.ListAuditEventsRequest(
                account_id=viewer.user.account_id,
                key_id=q["key_id"],
                actor_user_id=q["user_id"],
                action=q["action"],
                since=when(q["since"], "since"),
                until=when(q["until"], "until"),
                page_size=PAGE_SIZE,
                page_token=a.get("page", ""),
                # Newest first: what a partner opening the trail looks for is what just happened.
                newest_first=True,
            ),
        )
        return Listing(page.events, page.next_page_token)

    return await list_page(request, "audit.html", "events", fetch, q=q)
