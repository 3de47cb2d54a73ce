"""The delivery log: deliveries filtered, a delivery's page (its event, endpoint, status and payload,
and its attempts newest first, polled by htmx), a resend (htmx: the attempts in place; a plain form:
303 to the delivery's page), and the sandbox clock (303 back to the page its form is on)."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, TypeVar

from google.protobuf import duration_pb2
from sanic import Blueprint
from sanic.response import HTTPResponse

from portal.context import PortalRequest, hooks
from portal.forms import fields, number_of, when
from portal.pages import PAGE_SIZE, Listing, list_page
from portal.web import env_of, need, redirect, render, viewer_of
from portal.webhook_audit import audit_webhook
from portal.webhook_views import (
    DELIVERY_FILTERS,
    TEST_EVENT_KIND,
    clock_back,
    clock_notice,
    clock_span,
    delivery_in,
    filter_query,
    has_event_page,
    newest_first,
)
from svckit.clients import ClientError
from svckit.events import EVENT_KINDS
from svckit.protos import timestamp
from svckit.prototables import DELIVERY_STATUS, HOOKS_ENVIRONMENT
from travel.webhooks.v1 import webhooks_pb2 as wpb

bp = Blueprint("portal_deliveries")
T = TypeVar("T")


@bp.get("/<env:str>/deliveries")
async def deliveries(request: PortalRequest, env: str) -> HTTPResponse:
    env = env_of(request)
    viewer = need(request, "webhooks.read")
    a = request.args
    q = {k: a.get(k, "") for k in DELIVERY_FILTERS}
    default_since = timestamp(dt.datetime.now(dt.UTC) - dt.timedelta(days=30))

    async def fetch() -> Listing:
        page = await hooks(request).list_deliveries(
            wpb.ListDeliveriesRequest(
                account_id=viewer.user.account_id,
                environment=HOOKS_ENVIRONMENT.pb(env),
                endpoint_id=q["endpoint_id"],
                event_type=q["event_kind"],
                status=number_of(DELIVERY_STATUS, q["status"]),
                since=when(q["since"], "since") or default_since,
                until=when(q["until"], "until"),
                page_size=PAGE_SIZE,
                page_token=a.get("page", ""),
            ),
        )
        return Listing(page.deliveries, page.next_page_token)

    return await list_page(
        request, "deliveries.html", "deliveries", fetch, q=q, kinds=EVENT_KINDS, back_query=filter_query(q)
    )


async def attempts_of(request: PortalRequest, env: str, delivery_id: str) -> list[wpb.Attempt]:
    page = await hooks(request).list_attempts(
        wpb.ListAttemptsRequest(
            account_id=viewer_of(request).user.account_id,
            environment=HOOKS_ENVIRONMENT.pb(env),
            delivery_id=delivery_id,
            page_size=100,
        ),
    )
    return newest_first(page.attempts)


@dataclass(frozen=True)
class DeliveryFacts:
    """What a delivery's page shows above its attempts; None where webhookd has nothing to say (an
    endpoint deleted since, a test event or one older than 30 days, a delivery not found)."""

    delivery: wpb.Delivery | None = None
    endpoint: wpb.Endpoint | None = None
    event: wpb.Event | None = None


async def find_delivery(
    request: PortalRequest, scope: dict[str, Any], delivery_id: str
) -> wpb.Delivery | None:
    """The delivery itself, read by its id (ListDeliveries' ``delivery_id`` filter)."""
    page = await hooks(request).list_deliveries(
        wpb.ListDeliveriesRequest(**scope, delivery_id=delivery_id, page_size=1)
    )
    return delivery_in(page.deliveries, delivery_id)


async def _or_none(call: Awaitable[T]) -> T | None:
    """The answer of a read, None when webhookd has no such thing (NOT_FOUND)."""
    try:
        return await call
    except ClientError as exc:
        if exc.status != 404:
            raise
        return None


async def facts_of(
    request: PortalRequest, env: str, delivery_id: str, attempts: list[wpb.Attempt]
) -> DeliveryFacts:
    scope = {"account_id": viewer_of(request).user.account_id, "environment": HOOKS_ENVIRONMENT.pb(env)}
    delivery = await find_delivery(request, scope, delivery_id)
    if delivery is None:
        return DeliveryFacts()
    endpoint_call = hooks(request).get_endpoint(
        wpb.GetEndpointRequest(**scope, endpoint_id=delivery.endpoint_id)
    )
    if has_event_page(delivery.event_type):
        endpoint, event = await asyncio.gather(
            _or_none(endpoint_call),
            _or_none(hooks(request).get_event(wpb.GetEventRequest(**scope, event_id=delivery.event_id))),
        )
    else:
        endpoint, event = await _or_none(endpoint_call), None
    return DeliveryFacts(
        delivery,
        endpoint.endpoint if endpoint is not None else None,
        event.event if event is not None else None,
    )


@bp.get("/<env:str>/deliveries/<delivery_id:str>")
async def delivery_page(request: PortalRequest, env: str, delivery_id: str) -> HTTPResponse:
    env = env_of(request)
    need(request, "webhooks.read")
    attempts = await attempts_of(request, env, delivery_id)
    if request.headers.get("hx-request"):
        return render(request, "_attempts.html", attempts=attempts, delivery_id=delivery_id)
    facts = await facts_of(request, env, delivery_id, attempts)
    if facts.delivery is None and not attempts:
        # As an unknown event's page: nothing of that id in this account and environment (30 days).
        raise ClientError("not_found", f"No delivery {delivery_id} in the last 30 days here.")
    return render(
        request,
        "delivery.html",
        attempts=attempts,
        delivery_id=delivery_id,
        facts=facts,
        test_kind=TEST_EVENT_KIND,
    )


@bp.post("/<env:str>/attempts/<attempt_id:str>/resend")
async def resend(request: PortalRequest, env: str, attempt_id: str) -> HTTPResponse:
    env = env_of(request)
    viewer = need(request, "webhooks.write")
    got = await hooks(request).resend_attempt(
        wpb.ResendAttemptRequest(
            account_id=viewer.user.account_id,
            environment=HOOKS_ENVIRONMENT.pb(env),
            attempt_id=attempt_id,
        ),
    )
    await audit_webhook(
        request,
        "webhook_attempt.resent",
        got.delivery.endpoint_id,
        after={
            "attempt_id": attempt_id,
            "delivery_id": got.delivery.id,
            "event_id": got.delivery.event_id,
        },
    )
    if not request.headers.get("hx-request"):
        # The form without htmx: Post/Redirect/Get to the delivery's page.
        return redirect(
            request, f"/{env}/deliveries/{got.delivery.id}", "Resent: a new attempt is on its way."
        )
    attempts = await attempts_of(request, env, got.delivery.id)
    return render(
        request,
        "_attempts.html",
        status=202,
        attempts=attempts,
        delivery_id=got.delivery.id,
        polling=True,
    )


@bp.post("/<env:str>/clock")
async def advance_clock(request: PortalRequest, env: str) -> HTTPResponse:
    """Advance the sandbox clock (webhookd's AdvanceSandboxClock): pending sandbox deliveries become due
    that much earlier. Live has no clock: after the session, CSRF and role checks, no such page there."""
    env = env_of(request)
    viewer = need(request, "webhooks.write")
    if env != "sandbox":
        raise ClientError("not_found", "No such page.")
    form = fields(request)
    choice = form.get("by")
    span = clock_span(choice)
    got = await hooks(request).advance_sandbox_clock(
        wpb.AdvanceSandboxClockRequest(
            account_id=viewer.user.account_id,
            environment=wpb.ENVIRONMENT_SANDBOX,
            by=duration_pb2.Duration(seconds=int(span.total_seconds())),
        ),
    )
    back = clock_back(env, form.get("back"), form.get("back_query"))
    return redirect(request, back, clock_notice(choice, got.deliveries_due))
