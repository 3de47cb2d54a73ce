"""API keys: the list (and a new key), a key's page, rotation and revocation."""

from __future__ import annotations

from typing import Any

from google.protobuf import duration_pb2
from markupsafe import Markup
from sanic import Blueprint, response
from sanic.response import HTTPResponse

from portal.context import PortalRequest, auth
from portal.forms import fields, lines, period_seconds
from portal.pages import PAGE_SIZE, Listing, list_page
from portal.web import env_of, need, render, viewer_of
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
    key = (await auth(request).get_key(apb.GetKeyRequest(key_id=key_id))).key
    if key.account_id != viewer_of(request).user.account_id:
        raise ClientError("not_found", "No such key.")
    return key


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
        if exc.status != 400:
            raise
        values = {"name": form.get("name", ""), "scopes": scopes, "allowed_sources": "\n".join(sources)}
        return await keys_page(request, env, 400, errors={exc.field or "form": exc.message}, form=values)
    return render(request, "secret.html", title="API key created", key=created.key, secret=created.secret)


@bp.get("/<env:str>/keys/<key_id:str>")
async def key_page(request: PortalRequest, env: str, key_id: str) -> HTTPResponse:
    need(request, "keys.read")
    return render(request, "key.html", key=await get_key(request, key_id))


@bp.post("/<env:str>/keys/<key_id:str>/rotate")
async def rotate_key(request: PortalRequest, env: str, key_id: str) -> HTTPResponse:
    need(request, "keys.write")
    key = await get_key(request, key_id)
    try:
        grace = period_seconds(fields(request), "grace_hours")
    except ClientError as exc:
        return render(request, "key.html", status=400, key=key, errors={exc.field: exc.message})
    rotated = await auth(request).rotate_key(
        apb.RotateKeyRequest(
            key_id=key.id,
            grace_period=duration_pb2.Duration(seconds=grace),
            actor=actor(request),
        ),
    )
    return render(
        request,
        "secret.html",
        title="API key rotated",
        key=rotated.new_key,
        secret=rotated.secret,
        old_key=rotated.old_key,
    )


@bp.post("/<env:str>/keys/<key_id:str>/revoke")
async def revoke_key(request: PortalRequest, env: str, key_id: str) -> HTTPResponse:
    need(request, "keys.revoke")
    key = await get_key(request, key_id)
    form = fields(request)
    if form.get("confirm", "").strip() != key.name and form.get("confirm", "").strip() != key.hint:
        return render(
            request,
            "key.html",
            status=400,
            key=key,
            errors={"confirm": "type the key's name exactly to confirm"},
        )
    await auth(request).revoke_key(
        apb.RevokeKeyRequest(key_id=key.id, reason=form.get("reason", ""), actor=actor(request)),
    )
    return response.redirect(f"/{env}/keys/{key.id}", status=303)
