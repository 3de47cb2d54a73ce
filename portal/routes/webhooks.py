"""Webhook endpoints: the list (and a new endpoint), an endpoint's page, and one route per operation
on it; every operation goes in the audit trail and answers 303 to a page that says what it did. A new or
rotated signing secret reaches ``/<env>/webhooks/<id>/secret`` once, through a sealed flash."""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable
from typing import Any

from google.protobuf import duration_pb2, field_mask_pb2
from sanic import Blueprint
from sanic.response import HTTPResponse

from portal.context import PortalRequest, hooks
from portal.display import fmt
from portal.forms import fields, period_seconds, when
from portal.pages import PAGE_SIZE, Listing, list_page
from portal.web import env_of, need, redirect, redirect_with_secret, render, take_secret, viewer_of
from portal.webhook_audit import audit_webhook, endpoint_fields
from svckit.clients import ClientError
from svckit.events import EVENT_KINDS
from svckit.protos import datetime_of, timestamp
from svckit.prototables import HOOKS_ENVIRONMENT
from travel.webhooks.v1 import webhooks_pb2 as wpb

bp = Blueprint("portal_webhooks")
# (request, env, endpoint_id, the endpoint's reference in webhookd's requests)
EndpointAction = Callable[[PortalRequest, str, str, dict[str, Any]], Awaitable[HTTPResponse]]


async def endpoints_page(request: PortalRequest, env: str, status: int = 200, **extra: Any) -> HTTPResponse:
    viewer = need(request, "webhooks.read")

    async def fetch() -> Listing:
        page = await hooks(request).list_endpoints(
            wpb.ListEndpointsRequest(
                account_id=viewer.user.account_id,
                environment=HOOKS_ENVIRONMENT.pb(env),
                page_size=PAGE_SIZE,
                page_token=request.args.get("page", ""),
            ),
        )
        return Listing(page.endpoints, page.next_page_token)

    extra.setdefault("form", {})
    return await list_page(request, "webhooks.html", "endpoints", fetch, status, kinds=EVENT_KINDS, **extra)


def endpoint_ref(request: PortalRequest, env: str, endpoint_id: str) -> dict[str, Any]:
    return {
        "account_id": viewer_of(request).user.account_id,
        "environment": HOOKS_ENVIRONMENT.pb(env),
        "endpoint_id": endpoint_id,
    }


def endpoint_action(handler: EndpointAction) -> Callable[..., Awaitable[HTTPResponse]]:
    """An operation on one endpoint (webhooks.write): a refusal (400) shows the endpoint's page again
    with the error beside its field."""

    async def route(request: PortalRequest, env: str, endpoint_id: str) -> HTTPResponse:
        env = env_of(request)
        need(request, "webhooks.write")
        ref = endpoint_ref(request, env, endpoint_id)
        try:
            return await handler(request, env, endpoint_id, ref)
        except ClientError as exc:
            if exc.status != 400:
                raise
            got = await hooks(request).get_endpoint(wpb.GetEndpointRequest(**ref))
            return render(
                request,
                "endpoint.html",
                status=400,
                endpoint=got.endpoint,
                kinds=EVENT_KINDS,
                errors={exc.field or "form": exc.message},
            )

    route.__name__ = handler.__name__
    route.__doc__ = handler.__doc__
    return route


def back(request: PortalRequest, env: str, endpoint_id: str, notice: str) -> HTTPResponse:
    return redirect(request, f"/{env}/webhooks/{endpoint_id}", notice)


def with_secret(request: PortalRequest, env: str, endpoint_id: str, secret: str, notice: str) -> HTTPResponse:
    to = f"/{env}/webhooks/{endpoint_id}/secret"
    return redirect_with_secret(request, to, "signing_secret", endpoint_id, secret, notice)


@bp.get("/<env:str>/webhooks")
async def webhooks(request: PortalRequest, env: str) -> HTTPResponse:
    return await endpoints_page(request, env_of(request))


@bp.post("/<env:str>/webhooks")
async def create_endpoint(request: PortalRequest, env: str) -> HTTPResponse:
    env = env_of(request)
    viewer = need(request, "webhooks.write")
    form = fields(request)
    events = form.getlist("events")
    try:
        made = await hooks(request).register_endpoint(
            wpb.RegisterEndpointRequest(
                account_id=viewer.user.account_id,
                environment=HOOKS_ENVIRONMENT.pb(env),
                url=form.get("url", ""),
                events=events,
                description=form.get("description", ""),
            ),
        )
    except ClientError as exc:
        if exc.status != 400:
            raise
        values = {"url": form.get("url", ""), "events": events, "description": form.get("description", "")}
        return await endpoints_page(request, env, 400, errors={exc.field or "form": exc.message}, form=values)
    await audit_webhook(
        request, "webhook_endpoint.created", made.endpoint.id, after=endpoint_fields(made.endpoint)
    )
    return with_secret(request, env, made.endpoint.id, made.signing_secret, "Endpoint added.")


@bp.get("/<env:str>/webhooks/<endpoint_id:str>")
async def endpoint_page(request: PortalRequest, env: str, endpoint_id: str) -> HTTPResponse:
    need(request, "webhooks.read")
    got = await hooks(request).get_endpoint(wpb.GetEndpointRequest(**endpoint_ref(request, env, endpoint_id)))
    return render(request, "endpoint.html", endpoint=got.endpoint, kinds=EVENT_KINDS)


@bp.get("/<env:str>/webhooks/<endpoint_id:str>/secret")
async def endpoint_secret(request: PortalRequest, env: str, endpoint_id: str) -> HTTPResponse:
    """The page a new endpoint or a rotation redirects to: the signing secret once, then "shown once"."""
    env = env_of(request)
    need(request, "webhooks.read")
    got = await hooks(request).get_endpoint(wpb.GetEndpointRequest(**endpoint_ref(request, env, endpoint_id)))
    secret = take_secret(request, "signing_secret", endpoint_id)
    return render(
        request, "endpoint.html", endpoint=got.endpoint, kinds=EVENT_KINDS, secret=secret, secret_page=True
    )


@bp.get("/<env:str>/webhooks/<endpoint_id:str>/delete")
async def confirm_delete(request: PortalRequest, env: str, endpoint_id: str) -> HTTPResponse:
    """Deleting asks first: this page's form is the one that deletes."""
    env = env_of(request)
    need(request, "webhooks.write")
    got = await hooks(request).get_endpoint(wpb.GetEndpointRequest(**endpoint_ref(request, env, endpoint_id)))
    return render(
        request,
        "confirm.html",
        title="Delete this endpoint?",
        action=f"/{env}/webhooks/{endpoint_id}/delete",
        hidden={},
        explain=f"{got.endpoint.url} stops receiving events at once; its delivery log goes with it. "
        "This cannot be undone.",
        button="Delete endpoint",
        cancel=f"/{env}/webhooks/{endpoint_id}",
    )


@bp.post("/<env:str>/webhooks/<endpoint_id:str>/edit")
@endpoint_action
async def edit_endpoint(
    request: PortalRequest, env: str, endpoint_id: str, ref: dict[str, Any]
) -> HTTPResponse:
    form = fields(request)
    mask = field_mask_pb2.FieldMask(paths=["url", "events", "description"])
    old = await hooks(request).get_endpoint(wpb.GetEndpointRequest(**ref))
    new = await hooks(request).update_endpoint(
        wpb.UpdateEndpointRequest(
            **ref,
            update_mask=mask,
            url=form.get("url", ""),
            events=form.getlist("events"),
            description=form.get("description", ""),
        ),
    )
    before, after = endpoint_fields(old.endpoint), endpoint_fields(new.endpoint)
    changed = [name for name in before if before[name] != after[name]]
    await audit_webhook(
        request,
        "webhook_endpoint.updated",
        endpoint_id,
        before={name: before[name] for name in changed},
        after={name: after[name] for name in changed},
    )
    return back(request, env, endpoint_id, "Endpoint saved." if changed else "Nothing changed.")


@bp.post("/<env:str>/webhooks/<endpoint_id:str>/delete")
@endpoint_action
async def delete_endpoint(
    request: PortalRequest, env: str, endpoint_id: str, ref: dict[str, Any]
) -> HTTPResponse:
    gone = await hooks(request).delete_endpoint(wpb.DeleteEndpointRequest(**ref))
    await audit_webhook(
        request, "webhook_endpoint.deleted", endpoint_id, before=endpoint_fields(gone.endpoint)
    )
    return redirect(request, f"/{env}/webhooks", f"Endpoint {gone.endpoint.url} deleted.")


@bp.post("/<env:str>/webhooks/<endpoint_id:str>/enable")
@endpoint_action
async def enable_endpoint(
    request: PortalRequest, env: str, endpoint_id: str, ref: dict[str, Any]
) -> HTTPResponse:
    await hooks(request).enable_endpoint(wpb.EnableEndpointRequest(**ref))
    await audit_webhook(request, "webhook_endpoint.enabled", endpoint_id, after={"status": "enabled"})
    return back(request, env, endpoint_id, "Endpoint enabled: deliveries resume.")


@bp.post("/<env:str>/webhooks/<endpoint_id:str>/recover")
@endpoint_action
async def recover_endpoint(
    request: PortalRequest, env: str, endpoint_id: str, ref: dict[str, Any]
) -> HTTPResponse:
    since = when(fields(request).get("since", ""), "since") or timestamp(
        dt.datetime.now(dt.UTC) - dt.timedelta(days=1)
    )
    recovered = await hooks(request).recover_endpoint(wpb.RecoverEndpointRequest(**ref, since=since))
    await audit_webhook(
        request,
        "webhook_endpoint.recovered",
        endpoint_id,
        after={"since": fmt(datetime_of(since)), "recovered": recovered.recovered_count},
    )
    count = recovered.recovered_count
    noun = "delivery" if count == 1 else "deliveries"
    return back(request, env, endpoint_id, f"{count} {noun} queued (failed since {fmt(datetime_of(since))}).")


@bp.post("/<env:str>/webhooks/<endpoint_id:str>/test")
@endpoint_action
async def send_test_event(
    request: PortalRequest, env: str, endpoint_id: str, ref: dict[str, Any]
) -> HTTPResponse:
    sent = await hooks(request).send_test_event(wpb.SendTestEventRequest(**ref))
    await audit_webhook(
        request,
        "webhook_endpoint.test_sent",
        endpoint_id,
        after={"event_id": sent.event.id, "delivery_id": sent.delivery.id},
    )
    return redirect(request, f"/{env}/deliveries/{sent.delivery.id}", "Test event sent.")


@bp.post("/<env:str>/webhooks/<endpoint_id:str>/rotate")
@endpoint_action
async def rotate_signing_secret(
    request: PortalRequest, env: str, endpoint_id: str, ref: dict[str, Any]
) -> HTTPResponse:
    overlap = period_seconds(fields(request), "overlap_hours")
    rotated = await hooks(request).rotate_signing_secret(
        wpb.RotateSigningSecretRequest(**ref, overlap=duration_pb2.Duration(seconds=overlap)),
    )
    # The new secret is shown below, once; the record says only that it changed.
    await audit_webhook(
        request,
        "webhook_endpoint.secret_rotated",
        endpoint_id,
        after={
            "overlap_seconds": overlap,
            "old_signatures_until": fmt(datetime_of(rotated.endpoint.previous_secret_expires_at)),
        },
    )
    return with_secret(request, env, endpoint_id, rotated.signing_secret, "Signing secret rotated.")


@bp.post("/<env:str>/webhooks/<endpoint_id:str>/<action:str>")
async def no_endpoint_action(request: PortalRequest, env: str, endpoint_id: str, action: str) -> HTTPResponse:
    """Any other operation: refused as it always was, after the session, CSRF and role checks."""
    env_of(request)
    need(request, "webhooks.write")
    raise ClientError("not_found", "No such action.")
