"""GET /v1/ledger: a mode A account's credit balance and its entries, newest first (authsvc keeps them).

Scope: ``account:read`` or any product's ``read`` (reading ledger entries is a read action, spec §5). The
ledger is per environment like every resource: a test key reads the sandbox's, where no booking spends
credit. A mode B account has none: 404 ``not_found``.
"""

from __future__ import annotations

from typing import Any

from sanic import Blueprint
from sanic.response import HTTPResponse

from edge import convert
from edge.blueprints.webhooks import query_args
from edge.context import EdgeRequest
from edge.environments import Environment
from edge.exceptions import EdgeError
from edge.gate import Ctx, guarded
from edge.responses import json_response
from svckit.prototables import AUTH_ENVIRONMENT
from svckit.resources import PRODUCTS, read_scopes
from svckit.vocabulary import AccountMode
from travel.auth.v1 import auth_pb2

bp = Blueprint("ledger")

# Any of these lets a key read the ledger.
LEDGER_SCOPES = ("account:read", *read_scopes(PRODUCTS))
ENTRY_TYPES = {
    auth_pb2.LEDGER_ENTRY_KIND_HOLD: "hold",
    auth_pb2.LEDGER_ENTRY_KIND_CAPTURE: "capture",
    auth_pb2.LEDGER_ENTRY_KIND_RELEASE: "release",
    auth_pb2.LEDGER_ENTRY_KIND_CREDIT: "credit",
    auth_pb2.LEDGER_ENTRY_KIND_LIMIT: "limit",
    auth_pb2.LEDGER_ENTRY_KIND_WARNING_LEVEL: "warning_level",
}


def entry(e: auth_pb2.LedgerEntry) -> dict[str, Any]:
    return {
        "object": "ledger_entry",
        "id": e.id,
        "type": ENTRY_TYPES.get(e.kind, "other"),
        "reference": e.reference or None,
        "amount": e.amount,
        "availableAfter": e.available_after,
        "note": e.note or None,
        "created": convert.iso(e.created_at.ToDatetime()),
    }


def ledger_body(
    ledger: auth_pb2.CreditLedger, entries: list[dict[str, Any]], token: str, live: bool
) -> dict[str, Any]:
    return {
        "object": "ledger",
        "account": ledger.account_id,
        "livemode": live,
        "currency": ledger.currency or None,
        "creditLimit": ledger.credit_limit,
        "held": ledger.held,
        "captured": ledger.captured,
        "credits": ledger.credits,
        "available": ledger.available,
        "warningLevel": ledger.warning_level,
        "updated": convert.iso(ledger.updated_at.ToDatetime()) if ledger.HasField("updated_at") else None,
        "entries": {"object": "list", "data": entries, "nextPageToken": token or None},
    }


@bp.get("/v1/ledger")
@guarded("")
async def get_ledger(request: EdgeRequest, ctx: Ctx) -> HTTPResponse:
    """The account's credit balance and one page of its entries, newest first."""
    if not any(s in ctx.caller.scopes for s in LEDGER_SCOPES):
        raise EdgeError(
            "This API key lacks the scope account:read (or a product's read scope, e.g. hotels:read) "
            "required for this request.",
            type="missing_scope",
        )
    if ctx.caller.account_mode != AccountMode.A:
        raise EdgeError("Mode B accounts have no credit ledger: the traveller pays.", type="not_found")
    args = query_args(request)
    limit = convert.query_limit(args)
    where = {"account_id": ctx.caller.account_id, "environment": AUTH_ENVIRONMENT.pb(ctx.environment)}
    auth = request.app.ctx.auth
    ledger = (await auth.get_credit_ledger(auth_pb2.GetCreditLedgerRequest(**where))).ledger
    page = await auth.list_ledger_entries(
        auth_pb2.ListLedgerEntriesRequest(**where, page_size=limit, page_token=args.get("page_token", ""))
    )
    body = ledger_body(
        ledger, [entry(e) for e in page.entries], page.next_page_token, ctx.environment is Environment.LIVE
    )
    return json_response(body)
