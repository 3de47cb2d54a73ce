"""Webhook endpoints: the list (and a new endpoint), an endpoint's page, and one route per operation
on it; every operation goes in the audit trail and answers 303 to a page that says what it did. A new or
rotated signing secret reaches ``/<env>/webhooks/<id>/secret`` once, through a sealed flash. Recovering
counts first: ``GET .../recover`` is the dry run and asks, its form's POST queues them."""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable
from typing import Any

from google.protobuf import duration_pb2, field_mask_pb2
from google.protobuf.timestamp_pb2 import Timestamp
from sanic import Blueprint
from sanic.response import HTTPResponse

from portal.context import PortalRequest, hooks
from portal.display import fmt
from portal.forms import fields, period_seconds, query, when
from portal.pages import PAGE_SIZE, Listing, list_page
from portal.receiver_auth_form import (
    CERTIFICATE_CHOICES,
    headers_text,
    receiver_auth_of_form,
    receiver_auth_summary,
)
from portal.web import env_of, need, redirect, redirect_with_secret, render, take_secret, viewer_of
from portal.webhook_audit import audit_webhook, endpoint_fields
from portal.webhook_destinations import (
    DESTINATION_CHOICES,
    destination_paths,
    destination_request,
    destination_values,
    form_values,
)
from portal.webhook_views import (
    ORDERING_CHOICES,
    PAYLOAD_CHOICES,
    SCHEME_CHOICES,
    endpoint_values,
    filter_json,
    ordering_number,
    ordering_word,
    payload_number,
    payload_word,
    recover_notice,
    recover_question,
    scheme_number,
    scheme_word,
    signs_ed25519,
)
from svckit.clients import ClientError
from svckit.events import EVENT_KINDS
from svckit.protos import datetime_of, timestamp
from svckit.prototables import HOOKS_ENVIRONMENT, PAYLOAD_MODE
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

    extra.setdefault(
        "form", {"signature_scheme": scheme_word(0), "ordering": ordering_word(0), "payload": payload_word(0)}
    )
    return await list_page(
        request,
        "webhooks.html",
        "endpoints",
        fetch,
        status,
        kinds=EVENT_KINDS,
        schemes=SCHEME_CHOICES,
        orderings=ORDERING_CHOICES,
        payloads=PAYLOAD_CHOICES,
        destinations=DESTINATION_CHOICES,
        **extra,
    )


async def endpoint_view(
    request: PortalRequest, env: str, endpoint: wpb.Endpoint, status: int = 200, **extra: Any
) -> HTTPResponse:
    """The endpoint's page; with its ed25519 public keys when its deliveries carry ``v1a`` signatures."""
    scheme = scheme_word(endpoint.signature_scheme)
    keys: list[wpb.SigningKey] = []
    if signs_ed25519(scheme):
        listed = await hooks(request).list_signing_keys(
            wpb.ListSigningKeysRequest(**endpoint_ref(request, env, endpoint.id))
        )
        keys = list(listed.keys)
    poll_status = None
    if endpoint.type == wpb.DESTINATION_TYPE_POLLING:  # its queue: waiting, leased, last polled
        poll_status = await hooks(request).get_poll_status(
            wpb.GetPollStatusRequest(**endpoint_ref(request, env, endpoint.id))
        )
    return render(
        request,
        "endpoint.html",
        status=status,
        endpoint=endpoint,
        scheme=scheme,
        signing_keys=keys,
        poll_status=poll_status,
        shows_keys=signs_ed25519(scheme),
        values=extra.pop("values", None) or (endpoint_values(endpoint) | destination_values(endpoint)),
        PAYLOAD_WORDS=PAYLOAD_MODE.names(),
        receiver_auth=receiver_auth_summary(endpoint),
        receiver_headers=headers_text(endpoint),
        certificate_choices=CERTIFICATE_CHOICES,
        schemes=SCHEME_CHOICES,
        orderings=ORDERING_CHOICES,
        payloads=PAYLOAD_CHOICES,
        destinations=DESTINATION_CHOICES,
        kinds=EVENT_KINDS,
        **extra,
    )


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
            return await endpoint_view(
                request, env, got.endpoint, 400, errors={exc.field or "form": exc.message}
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
                events=events,
                description=form.get("description", ""),
                signature_scheme=scheme_number(form.get("signature_scheme")),
                ordering=ordering_number(form.get("ordering")),
                filter_json=filter_json(form.get("filter")),
                payload=payload_number(form.get("payload")),
                **destination_request(form),
            ),
        )
    except ClientError as exc:
        if exc.status != 400:
            raise
        values = form_values(form) | {
            "url": form.get("url", ""),
            "events": events,
            "description": form.get("description", ""),
            "signature_scheme": form.get("signature_scheme") or scheme_word(0),
            "ordering": form.get("ordering") or ordering_word(0),
            "filter": form.get("filter"),
            "payload": form.get("payload") or payload_word(0),
        }
        return await endpoints_page(request, env, 400, errors={exc.field or "form": exc.message}, form=values)
    await audit_webhook(
        request, "webhook_endpoint.created", made.endpoint.id, after=endpoint_fields(made.endpoint)
    )
    return with_secret(request, env, made.endpoint.id, made.signing_secret, "Endpoint added.")


@bp.get("/<env:str>/webhooks/<endpoint_id:str>")
async def endpoint_page(request: PortalRequest, env: str, endpoint_id: str) -> HTTPResponse:
    need(request, "webhooks.read")
    got = await hooks(request).get_endpoint(wpb.GetEndpointRequest(**endpoint_ref(request, env, endpoint_id)))
    return await endpoint_view(request, env, got.endpoint)


@bp.get("/<env:str>/webhooks/<endpoint_id:str>/secret")
async def endpoint_secret(request: PortalRequest, env: str, endpoint_id: str) -> HTTPResponse:
    """The page a new endpoint or a rotation redirects to: the signing secret once, then "shown once"."""
    env = env_of(request)
    need(request, "webhooks.read")
    got = await hooks(request).get_endpoint(wpb.GetEndpointRequest(**endpoint_ref(request, env, endpoint_id)))
    secret = take_secret(request, "signing_secret", endpoint_id)
    return await endpoint_view(request, env, got.endpoint, secret=secret, secret_page=True)


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
    paths = ["events", "description", *destination_paths(fields(request))]
    # A form without the field (an older page) leaves the scheme as it is.
    scheme = form.get("signature_scheme")
    if scheme:
        paths.append("signature_scheme")
    ordering = form.get("ordering")
    if ordering:
        paths.append("ordering")
    payload = form.get("payload")
    if payload:
        paths.append("payload")
    # The filter's textarea is on the form (a blank one removes the filter): checked here first, so a bad
    # one comes back beside the field with the operator's path.
    old = await hooks(request).get_endpoint(wpb.GetEndpointRequest(**ref))
    flt = ""
    if form.get("filter_shown"):
        paths.append("filter_json")
        try:
            flt = filter_json(form.get("filter"))
        except ClientError as exc:  # the page again, with what was typed and the error beside it
            typed = endpoint_values(old.endpoint) | destination_values(old.endpoint)
            typed["filter"] = form.get("filter")
            return await endpoint_view(
                request, env, old.endpoint, 400, errors={"filter": exc.message}, values=typed
            )
    new = await hooks(request).update_endpoint(
        wpb.UpdateEndpointRequest(
            **ref,
            update_mask=field_mask_pb2.FieldMask(paths=paths),
            events=form.getlist("events"),
            description=form.get("description", ""),
            signature_scheme=scheme_number(scheme),
            ordering=ordering_number(ordering),
            filter_json=flt,
            payload=payload_number(payload),
            **(destination_request(form) if form.get("type") else {"url": form.get("url", "")}),
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


@bp.post("/<env:str>/webhooks/<endpoint_id:str>/receiver-auth")
@endpoint_action
async def set_receiver_auth(
    request: PortalRequest, env: str, endpoint_id: str, ref: dict[str, Any]
) -> HTTPResponse:
    """The "Receiver authentication" form: replaces the endpoint's whole receiverAuth (docs/webhooks.md)."""
    old = await hooks(request).get_endpoint(wpb.GetEndpointRequest(**ref))
    wanted = receiver_auth_of_form(fields(request), old.endpoint)
    new = await hooks(request).update_endpoint(
        wpb.UpdateEndpointRequest(
            **ref, update_mask=field_mask_pb2.FieldMask(paths=["receiver_auth"]), receiver_auth=wanted
        ),
    )
    before, after = receiver_auth_summary(old.endpoint), receiver_auth_summary(new.endpoint)
    await audit_webhook(
        request,
        "webhook_endpoint.updated",
        endpoint_id,
        before={"receiver_auth": before},
        after={"receiver_auth": after},
    )
    return back(request, env, endpoint_id, "Receiver authentication saved.")


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


def recover_since(text: str) -> Timestamp:
    """The recovery's start: the form's time, or a day ago when it is empty."""
    return when(text, "since") or timestamp(dt.datetime.now(dt.UTC) - dt.timedelta(days=1))


@bp.get("/<env:str>/webhooks/<endpoint_id:str>/recover")
@endpoint_action
async def confirm_recover(
    request: PortalRequest, env: str, endpoint_id: str, ref: dict[str, Any]
) -> HTTPResponse:
    """The dry run: how many deliveries recovering would queue again (nothing changes), and the form that
    recovers them from the same instant."""
    since = recover_since(query(request).get("since", ""))
    counted = await hooks(request).recover_endpoint(
        wpb.RecoverEndpointRequest(**ref, since=since, dry_run=True)
    )
    title, explain = recover_question(counted.recovered_count, fmt(datetime_of(since)))
    return render(
        request,
        "confirm.html",
        title=title,
        action=f"/{env}/webhooks/{endpoint_id}/recover",
        hidden={"since": since.ToDatetime(tzinfo=dt.UTC).isoformat()},
        explain=explain,
        button="Recover",
        cancel=f"/{env}/webhooks/{endpoint_id}",
    )


@bp.post("/<env:str>/webhooks/<endpoint_id:str>/recover")
@endpoint_action
async def recover_endpoint(
    request: PortalRequest, env: str, endpoint_id: str, ref: dict[str, Any]
) -> HTTPResponse:
    since = recover_since(fields(request).get("since", ""))
    recovered = await hooks(request).recover_endpoint(wpb.RecoverEndpointRequest(**ref, since=since))
    await audit_webhook(
        request,
        "webhook_endpoint.recovered",
        endpoint_id,
        after={"since": fmt(datetime_of(since)), "recovered": recovered.recovered_count},
    )
    return back(request, env, endpoint_id, recover_notice(recovered.recovered_count, fmt(datetime_of(since))))


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
