"""The delivery log: deliveries filtered, a delivery's attempts (polled by htmx), and a resend (htmx:
the attempts in place; a plain form: 303 to the delivery's page)."""

from __future__ import annotations

import datetime as dt

from sanic import Blueprint
from sanic.response import HTTPResponse

from portal.context import PortalRequest, hooks
from portal.forms import number_of, when
from portal.pages import PAGE_SIZE, Listing, list_page
from portal.web import env_of, need, redirect, render, viewer_of
from portal.webhook_audit import audit_webhook
from svckit.events import EVENT_KINDS
from svckit.protos import timestamp
from svckit.prototables import DELIVERY_STATUS, HOOKS_ENVIRONMENT
from travel.webhooks.v1 import webhooks_pb2 as wpb

bp = Blueprint("portal_deliveries")


@bp.get("/<env:str>/deliveries")
async def deliveries(request: PortalRequest, env: str) -> HTTPResponse:
    env = env_of(request)
    viewer = need(request, "webhooks.read")
    a = request.args
    q = {k: a.get(k, "") for k in ("endpoint_id", "event_kind", "status", "since", "until")}
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

    return await list_page(request, "deliveries.html", "deliveries", fetch, q=q, kinds=EVENT_KINDS)


async def attempts_of(request: PortalRequest, env: str, delivery_id: str) -> list[wpb.Attempt]:
    page = await hooks(request).list_attempts(
        wpb.ListAttemptsRequest(
            account_id=viewer_of(request).user.account_id,
            environment=HOOKS_ENVIRONMENT.pb(env),
            delivery_id=delivery_id,
            page_size=100,
        ),
    )
    return sorted(page.attempts, key=lambda x: x.attempt_number)


@bp.get("/<env:str>/deliveries/<delivery_id:str>")
async def delivery_page(request: PortalRequest, env: str, delivery_id: str) -> HTTPResponse:
    env = env_of(request)
    need(request, "webhooks.read")
    attempts = await attempts_of(request, env, delivery_id)
    if request.headers.get("hx-request"):
        return render(request, "_attempts.html", attempts=attempts, delivery_id=delivery_id)
    return render(request, "delivery.html", attempts=attempts, delivery_id=delivery_id)


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
