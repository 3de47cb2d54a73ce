"""API keys: the list (and a new key), a key's page, its edit, rotation and revocation. A new or rotated
key's secret reaches its page once, through a sealed flash (``redirect_with_secret``), never as the
answer of the POST: a reload shows the page again, never repeats the action."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from google.protobuf import duration_pb2, field_mask_pb2
from markupsafe import Markup
from sanic import Blueprint, response
from sanic.response import HTTPResponse

from portal.context import PortalRequest, auth
from portal.forms import fields, lines, period_seconds, query, whole_number
from portal.pages import PAGE_SIZE, Listing, list_page
from portal.web import env_of, need, redirect, redirect_with_secret, render, take_secret, viewer_of
from svckit.allowlist import validate_allowlist
from svckit.clients import ClientError
from svckit.errors import InvalidInput
from svckit.prototables import AUTH_ENVIRONMENT
from svckit.scopes import ALL_SCOPES
from travel.auth.v1 import auth_pb2 as apb

bp = Blueprint("portal_keys")


def actor(request: PortalRequest) -> apb.Actor:
    user = viewer_of(request).user
    return apb.Actor(user=user.email, source_address=request.ip or "", user_id=user.id)


async def keys_page(request: PortalRequest, env: str, status: int = 200, **extra: Any) -> HTTPResponse:
    viewer = need(request, "keys.read")

    async def fetch() -> Listing:
        page = await auth(request).list_keys(
            apb.ListKeysRequest(
                account_id=viewer.user.account_id,
                environment=AUTH_ENVIRONMENT.pb(env),
                include_revoked=True,
                page_size=PAGE_SIZE,
                page_token=request.args.get("page", ""),
            ),
        )
        return Listing(page.keys, page.next_page_token)

    extra.setdefault("form", {})
    return await list_page(request, "keys.html", "keys", fetch, status, scopes=ALL_SCOPES, **extra)


async def get_key(request: PortalRequest, key_id: str) -> apb.ApiKey:
    """The key of a page's URL, in the URL's environment only: a live key is never shown, edited,
    rotated or revoked under /sandbox/... (nor a sandbox key under /live/...)."""
    key = (await auth(request).get_key(apb.GetKeyRequest(key_id=key_id))).key
    mine = key.account_id == viewer_of(request).user.account_id
    if not mine or key.environment != AUTH_ENVIRONMENT.pb(env_of(request)):
        raise ClientError("not_found", "No such key.")
    return key


def key_view(
    request: PortalRequest,
    key: apb.ApiKey,
    status: int = 200,
    form: Any = None,
    errors: dict[str, str] | None = None,
    revocation: Revocation | None = None,
) -> HTTPResponse:
    """A key's page; ``form``: the refused edit form (else the key's own values fill it)."""
    values = key_values(form, key)
    return render(
        request,
        "key.html",
        status=status,
        key=key,
        scopes=ALL_SCOPES,
        form=values,
        errors=errors or {},
        revocation=revocation,
    )


@dataclass(frozen=True)
class Revocation:
    """What a revoked key's page says of its revocation: when, why and who (from the audit trail)."""

    at: dt.datetime
    reason: str
    by: str
    # Where a secret scanner found it in public, when a leak report revoked it (authsvc._sql_leaks).
    found_at: str = ""


def revocation_of(key: apb.ApiKey, events: Sequence[apb.AuditEvent]) -> Revocation | None:
    """The revocation of ``key`` as its ``key.revoked`` audit record tells it (who and why); the key's
    own ``revoked_at`` alone when the record is not readable. None for a key not revoked."""
    if not key.HasField("revoked_at"):
        return None
    record = next((e for e in events if e.action == "key.revoked" and e.key_id == key.id), None)
    if record is None:
        return Revocation(key.revoked_at.ToDatetime(dt.UTC), "", "")
    reason = record.after.fields["reason"].string_value if "reason" in record.after.fields else ""
    who = record.actor.user or record.actor.service
    if record.actor.service and record.actor.user:
        who = f"{record.actor.user} (through {record.actor.service})"
    leak = record.after.fields["leak"].struct_value if "leak" in record.after.fields else None
    found_at = leak.fields["url"].string_value if leak is not None and "url" in leak.fields else ""
    return Revocation(record.occurred_at.ToDatetime(dt.UTC), reason, who, found_at)


async def revocation(request: PortalRequest, key: apb.ApiKey) -> Revocation | None:
    """``revocation_of`` the key, reading its audit trail when the viewer may (``audit.read``)."""
    if not key.HasField("revoked_at"):
        return None
    events: Sequence[apb.AuditEvent] = ()
    if viewer_of(request).can("audit.read"):
        page = await auth(request).list_audit_events(
            apb.ListAuditEventsRequest(
                account_id=key.account_id, key_id=key.id, action="key.revoked", page_size=1, newest_first=True
            )
        )
        events = page.events
    return revocation_of(key, events)


@bp.get("/<env:str>/keys")
async def keys(request: PortalRequest, env: str) -> HTTPResponse:
    return await keys_page(request, env_of(request))


@bp.post("/<env:str>/keys/validate-sources")
async def validate_sources(request: PortalRequest, env: str) -> HTTPResponse:
    need(request, "keys.write")
    try:
        validate_allowlist(lines(fields(request).get("allowed_sources", "")))
    except InvalidInput as exc:
        return response.html(f'<span class="field-error">{Markup.escape(exc.message)}</span>')
    return response.html('<span class="field-ok">✓ valid</span>')


@bp.post("/<env:str>/keys")
async def create_key(request: PortalRequest, env: str) -> HTTPResponse:
    env = env_of(request)
    viewer = need(request, "keys.write")
    form = fields(request)
    scopes = form.getlist("scopes")
    sources = lines(form.get("allowed_sources", ""))
    try:
        created = await auth(request).create_key(
            apb.CreateKeyRequest(
                account_id=viewer.user.account_id,
                environment=AUTH_ENVIRONMENT.pb(env),
                name=form.get("name", ""),
                scopes=scopes,
                allowed_sources=sources,
                actor=actor(request),
            ),
        )
    except ClientError as exc:
        # A live key before the account is certified (authsvc._certify_gate): the form says what is missing.
        gated = exc.type == "certification_required"
        if exc.status != 400 and not gated:
            raise
        values = {"name": form.get("name", ""), "scopes": scopes, "allowed_sources": "\n".join(sources)}
        errors = {"form" if gated else exc.field or "form": exc.message}
        return await keys_page(request, env, 403 if gated else 400, errors=errors, form=values)
    key = created.key
    return redirect_with_secret(request, f"/{env}/keys/{key.id}/secret", "key", key.id, created.secret)


@bp.get("/<env:str>/keys/<key_id:str>")
async def key_page(request: PortalRequest, env: str, key_id: str) -> HTTPResponse:
    need(request, "keys.read")
    key = await get_key(request, key_id)
    return key_view(request, key, revocation=await revocation(request, key))


@bp.get("/<env:str>/keys/<key_id:str>/secret")
async def key_secret(request: PortalRequest, env: str, key_id: str) -> HTTPResponse:
    """The page a new or rotated key's POST redirects to: its secret once, then "shown once"."""
    need(request, "keys.read")
    key = await get_key(request, key_id)
    old_key = await get_key(request, key.rotated_from_key_id) if key.rotated_from_key_id else None
    return render(
        request,
        "secret.html",
        title="API key rotated" if old_key else "API key created",
        key=key,
        secret=take_secret(request, "key", key.id),
        old_key=old_key,
    )


def key_values(form: Any, key: apb.ApiKey) -> dict[str, Any]:
    """What the edit form shows: the key's values, or those the refused form sent."""
    if form is None:
        return {
            "name": key.name,
            "scopes": list(key.scopes),
            "allowed_sources": "\n".join(key.allowed_sources),
            "rate_limit": str(key.rate_limit),
        }
    return {
        "name": form.get("name", ""),
        "scopes": form.getlist("scopes"),
        "allowed_sources": form.get("allowed_sources", ""),
        "rate_limit": form.get("rate_limit", ""),
    }


@bp.post("/<env:str>/keys/<key_id:str>/edit")
async def edit_key(request: PortalRequest, env: str, key_id: str) -> HTTPResponse:
    """Name, scopes, allow list and rate limit (authsvc's UpdateKey, audited with before and after);
    only what changed is sent."""
    env = env_of(request)
    need(request, "keys.write")
    key = await get_key(request, key_id)
    form = fields(request)
    wanted = apb.UpdateKeyRequest(
        key_id=key.id,
        name=form.get("name", "").strip(),
        scopes=form.getlist("scopes"),
        allowed_sources=lines(form.get("allowed_sources", "")),
        actor=actor(request),
    )
    try:
        wanted.rate_limit = whole_number(form, "rate_limit")
        paths = [
            path
            for path, now, before in (
                ("name", wanted.name, key.name),
                ("scopes", sorted(wanted.scopes), sorted(key.scopes)),
                ("allowed_sources", list(wanted.allowed_sources), list(key.allowed_sources)),
                ("rate_limit", wanted.rate_limit, key.rate_limit),
            )
            if now != before
        ]
        if not paths:
            return redirect(request, f"/{env}/keys/{key.id}", "Nothing changed.")
        wanted.update_mask.CopyFrom(field_mask_pb2.FieldMask(paths=paths))
        await auth(request).update_key(wanted)
    except ClientError as exc:
        if exc.status != 400:
            raise
        return key_view(request, key, 400, form, {exc.field or "form": exc.message})
    return redirect(request, f"/{env}/keys/{key.id}", "Key saved: the edge applies it within a second.")


@bp.get("/<env:str>/keys/<key_id:str>/rotate")
async def confirm_rotate(request: PortalRequest, env: str, key_id: str) -> HTTPResponse:
    """Rotating asks first: this page's form is the one that rotates."""
    env = env_of(request)
    need(request, "keys.write")
    key = await get_key(request, key_id)
    try:
        grace = period_seconds(query(request), "grace_hours")
    except ClientError as exc:
        return key_view(request, key, 400, errors={exc.field: exc.message})
    hours = grace // 3600
    return render(
        request,
        "confirm.html",
        title=f"Rotate key {key.name or key.id}?",
        action=f"/{env}/keys/{key.id}/rotate",
        hidden={"grace_hours": str(hours)},
        explain=(
            f"A new key with a new secret replaces {key.hint}. The old secret keeps working for "
            f"{hours} hour{'s' if hours != 1 else ''}" + (", then stops." if hours else ": it stops now.")
        ),
        button="Rotate key",
        cancel=f"/{env}/keys/{key.id}",
    )


@bp.post("/<env:str>/keys/<key_id:str>/rotate")
async def rotate_key(request: PortalRequest, env: str, key_id: str) -> HTTPResponse:
    env = env_of(request)
    need(request, "keys.write")
    key = await get_key(request, key_id)
    try:
        grace = period_seconds(fields(request), "grace_hours")
    except ClientError as exc:
        return key_view(request, key, 400, errors={exc.field: exc.message})
    rotated = await auth(request).rotate_key(
        apb.RotateKeyRequest(
            key_id=key.id,
            grace_period=duration_pb2.Duration(seconds=grace),
            actor=actor(request),
        ),
    )
    new = rotated.new_key
    return redirect_with_secret(request, f"/{env}/keys/{new.id}/secret", "key", new.id, rotated.secret)


@bp.post("/<env:str>/keys/<key_id:str>/revoke")
async def revoke_key(request: PortalRequest, env: str, key_id: str) -> HTTPResponse:
    need(request, "keys.revoke")
    key = await get_key(request, key_id)
    form = fields(request)
    if form.get("confirm", "").strip() != key.name and form.get("confirm", "").strip() != key.hint:
        return key_view(request, key, 400, errors={"confirm": "type the key's name exactly to confirm"})
    await auth(request).revoke_key(
        apb.RevokeKeyRequest(key_id=key.id, reason=form.get("reason", ""), actor=actor(request)),
    )
    return redirect(request, f"/{env}/keys/{key.id}", "Key revoked: the edge refuses it within a second.")
