"""GET /v1/event-types and GET /v1/event-types/{kind}: the event catalog (svckit.catalog) as JSON, every
kind with what it means, the ``state`` its envelope carries, the JSON Schema of its ``data`` and an
example ``data``, so a partner's code can read (and test against) what its endpoint will receive.
The catalog is fixed: every answer is serialised once, at import."""

from __future__ import annotations

import json
from typing import Any

from sanic import Blueprint
from sanic.response import HTTPResponse

from edge.context import EdgeRequest
from edge.exceptions import EdgeError
from edge.gate import Ctx, guarded
from edge.responses import EdgeResponse
from svckit.catalog import catalog

bp = Blueprint("catalog")

SCOPE = "account:read"


def event_type(entry: dict[str, Any]) -> dict[str, Any]:
    """One catalog entry as the API answers it (who publishes a kind internally is not part of it)."""
    return {
        "object": "event_type",
        "kind": entry["kind"],
        "description": entry["description"],
        "states": entry["states"],
        "mode": entry["mode"],
        "subscribable": entry["subscribable"],
        "schema": entry["schema"],
        "example": entry["example"],
        "references": entry["references"],
        "thinSchema": entry["thinSchema"],
    }


def _json(body: Any) -> bytes:
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


EVENT_TYPES = [event_type(e) for e in catalog(include_test=True)]
_LIST = _json({"object": "list", "data": EVENT_TYPES, "nextPageToken": None})
_ONE = {t["kind"]: _json(t) for t in EVENT_TYPES}


def _answer(body: bytes) -> HTTPResponse:
    return EdgeResponse(body, content_type="application/json")


@bp.get("/v1/event-types")
@guarded(SCOPE)
async def list_event_types(request: EdgeRequest, ctx: Ctx) -> HTTPResponse:
    """Every event kind, in catalog order (webhook.test, sent by test sends only, last)."""
    return _answer(_LIST)


@bp.get("/v1/event-types/<kind:str>")
@guarded(SCOPE)
async def get_event_type(request: EdgeRequest, ctx: Ctx, kind: str) -> HTTPResponse:
    """One event kind, e.g. booking.confirmed."""
    body = _ONE.get(kind)
    if body is None:
        raise EdgeError(f"no event kind {kind[:64]!r}; GET /v1/event-types lists them", type="not_found")
    return _answer(body)
