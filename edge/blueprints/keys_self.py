"""``GET /v1/keys/self`` and ``DELETE /v1/keys/self``: the presenting key, inspected or revoked by itself.

No scope is required (``guarded("")``): any key may always check that it works and what it may do, and
revoke itself -- the first thing to do with a key one suspects leaked, whatever its scopes. The answer
names the key (id, environment, status, scopes, expiry) and nothing about the account or its people, so a
scanner holding a found key learns no personal data from it. Revoking is not a business write: a
read-only account's key may still revoke itself. The revocation is authsvc's RevokeOwnKey, by the SHA-256
of the presented secret, audited as the key acting for itself with the reason "revoked by itself";
apikey.revoked fires as for any revocation.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from typing import Any

from sanic import Blueprint
from sanic.response import HTTPResponse

from edge.context import EdgeRequest
from edge.convert import iso
from edge.credentials import key_from_authorization
from edge.environments import Environment
from edge.gate import Ctx, guarded
from edge.responses import json_response
from travel.auth.v1 import auth_pb2

bp = Blueprint("keys_self")
PATH = "/v1/keys/self"


def _body(ctx: Ctx, status: str, revoked_at: str | None = None) -> dict[str, Any]:
    c = ctx.caller
    body: dict[str, Any] = {
        "object": "api_key",
        "id": c.key_id,
        "environment": ctx.environment.value,
        "livemode": ctx.environment is Environment.LIVE,
        "status": status,
        "scopes": list(c.scopes),
        "expiresAt": iso(c.expires_at),
    }
    if revoked_at is not None:
        body["revokedAt"] = revoked_at
    return body


@bp.get(PATH)
@guarded("")
async def get_self(request: EdgeRequest, ctx: Ctx) -> HTTPResponse:
    """Check the presenting key: it works, and what it may do."""
    return json_response(_body(ctx, ctx.caller.key_status))


@bp.delete(PATH)
@guarded("", write=False)
async def delete_self(request: EdgeRequest, ctx: Ctx) -> HTTPResponse:
    """Revoke the presenting key, at once, at every edge."""
    secret = key_from_authorization(request.headers.get("authorization"))
    resp = await request.app.ctx.auth.revoke_own_key(
        auth_pb2.RevokeOwnKeyRequest(
            token_hash=hashlib.sha256(secret.encode("utf-8")).hexdigest(), source_address=ctx.source
        )
    )
    # This edge forgets the key now (its next request here is refused at once); the others when
    # authsvc's watch tells them, well under a second later.
    request.app.ctx.authorizer.apply_change(
        auth_pb2.KEY_CHANGE_KIND_REVOKED, ctx.caller.key_id, ctx.caller.account_id
    )
    revoked_at = (
        iso(resp.key.revoked_at.ToDatetime(tzinfo=dt.UTC)) if resp.key.HasField("revoked_at") else None
    )
    return json_response(_body(ctx, "revoked", revoked_at))
