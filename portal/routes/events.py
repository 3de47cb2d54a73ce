"""The event log (webhookd's ListEvents: the last 30 days, newest first, filtered by kind and time) and
an event's page: its payload as delivered, its deliveries to the account's endpoints, and the endpoints
whose content filter left it out ("filtered")."""

from __future__ import annotations

from sanic import Blueprint
from sanic.response import HTTPResponse

from portal.context import PortalRequest, hooks
from portal.forms import when
from portal.pages import PAGE_SIZE, Listing, list_page
from portal.web import env_of, need, render
from portal.webhook_views import filtered_out
from svckit.events import EVENT_KINDS
from svckit.prototables import HOOKS_ENVIRONMENT
from travel.webhooks.v1 import webhooks_pb2 as wpb

bp = Blueprint("portal_events")
# An event goes to each endpoint subscribed to its kind once: one page of deliveries holds them all.
DELIVERIES_OF_AN_EVENT = 100


@bp.get("/<env:str>/events")
async def events(request: PortalRequest, env: str) -> HTTPResponse:
    env = env_of(request)
    viewer = need(request, "webhooks.read")
    a = request.args
    q = {k: a.get(k, "") for k in ("kind", "since", "until")}

    async def fetch() -> Listing:
        page = await hooks(request).list_events(
            wpb.ListEventsRequest(
                account_id=viewer.user.account_id,
                environment=HOOKS_ENVIRONMENT.pb(env),
                types=[q["kind"]] if q["kind"] else [],
                since=when(q["since"], "since"),
                until=when(q["until"], "until"),
                page_size=PAGE_SIZE,
                page_token=a.get("page", ""),
            ),
        )
        return Listing(page.events, page.next_page_token)

    return await list_page(request, "events.html", "events", fetch, q=q, kinds=EVENT_KINDS)


@bp.get("/<env:str>/events/<event_id:str>")
async def event_page(request: PortalRequest, env: str, event_id: str) -> HTTPResponse:
    env = env_of(request)
    viewer = need(request, "webhooks.read")
    scope = {"account_id": viewer.user.account_id, "environment": HOOKS_ENVIRONMENT.pb(env)}
    got = await hooks(request).get_event(wpb.GetEventRequest(**scope, event_id=event_id))
    deliveries = await hooks(request).list_deliveries(
        wpb.ListDeliveriesRequest(**scope, event_id=event_id, page_size=DELIVERIES_OF_AN_EVENT),
    )
    # The endpoints whose content filter left this event out: no delivery was made, nothing stored; their
    # filters tell (portal.webhook_views.filtered_out).
    endpoints = await hooks(request).list_endpoints(
        wpb.ListEndpointsRequest(**scope, page_size=DELIVERIES_OF_AN_EVENT)
    )
    delivered = [d.endpoint_id for d in deliveries.deliveries]
    return render(
        request,
        "event.html",
        event=got.event,
        deliveries=list(deliveries.deliveries),
        more_deliveries=bool(deliveries.next_page_token),
        filtered=filtered_out(got.event, endpoints.endpoints, delivered),
    )
