"""GET /<env>/requests: the request log (what the edge answered this account's keys, metadata only),
newest first; filtered by key, status class, error type, method, route template and time window (an
Insights error cell links here with its error type, route and week), or one request looked up by its
``req_...`` id (in either environment: an id pasted from an error is found whichever host answered it)."""

from __future__ import annotations

import datetime as dt

from sanic import Blueprint
from sanic.response import HTTPResponse

from portal.context import PortalRequest, auth
from portal.pages import PAGE_SIZE, Listing, list_page
from portal.web import env_of, need
from svckit.clients import ClientError
from svckit.protos import timestamp
from svckit.prototables import AUTH_ENVIRONMENT
from travel.auth.v1 import auth_pb2 as apb

bp = Blueprint("portal_requests")

# The status filter's choices: the class ListRequests takes.
STATUS_CLASSES = {"": 0, "2xx": 2, "4xx": 4, "5xx": 5}
FILTERS = ("request_id", "key_id", "status", "error_type", "method", "route", "since", "until")


def moment(value: str, field: str) -> dt.datetime | None:
    """A filter's time (ISO 8601; UTC when it names no offset), or None when empty."""
    if not value:
        return None
    try:
        when = dt.datetime.fromisoformat(value)
    except ValueError:
        raise ClientError("invalid_request", "a time such as 2026-06-01T09:00", field=field) from None
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


@bp.get("/<env:str>/requests")
async def requests(request: PortalRequest, env: str) -> HTTPResponse:
    viewer = need(request, "keys.read")
    env = env_of(request)
    a = request.args
    q = {k: a.get(k, "").strip() for k in FILTERS}

    async def fetch() -> Listing:
        status_class = STATUS_CLASSES.get(q["status"])
        if status_class is None:
            raise ClientError("invalid_request", "choose 2xx, 4xx or 5xx", field="status")
        since, until = moment(q["since"], "since"), moment(q["until"], "until")
        lookup = q["request_id"]
        page = await auth(request).list_requests(
            apb.ListRequestsRequest(
                account_id=viewer.user.account_id,
                # A looked-up id in either environment; a listing in the page's.
                environment=apb.ENVIRONMENT_UNSPECIFIED if lookup else AUTH_ENVIRONMENT.pb(env),
                request_id=lookup,
                key_id="" if lookup else q["key_id"],
                status_class=0 if lookup else status_class,
                error_type="" if lookup else q["error_type"],
                method="" if lookup else q["method"].upper(),
                route="" if lookup else q["route"],
                since=None if lookup else timestamp(since),
                until=None if lookup else timestamp(until),
                page_size=PAGE_SIZE,
                page_token=a.get("page", ""),
            ),
        )
        return Listing(page.requests, page.next_page_token)

    return await list_page(
        request, "requests.html", "requests", fetch, q=q, status_classes=list(STATUS_CLASSES)[1:]
    )
