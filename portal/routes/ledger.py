"""GET /<env>/ledger: a mode A account's credit (limit, held, captured, credits, available, warning level)
and its entries, newest first. A mode B account has no ledger: the page says so."""

from __future__ import annotations

from sanic import Blueprint
from sanic.response import HTTPResponse

from portal.context import PortalRequest, auth
from portal.pages import PAGE_SIZE, Listing, list_page
from portal.web import env_of, need, render
from svckit.prototables import AUTH_ENVIRONMENT
from travel.auth.v1 import auth_pb2 as apb

bp = Blueprint("portal_ledger")

ENTRY_NAMES = {
    apb.LEDGER_ENTRY_KIND_HOLD: "Hold",
    apb.LEDGER_ENTRY_KIND_CAPTURE: "Captured",
    apb.LEDGER_ENTRY_KIND_RELEASE: "Released",
    apb.LEDGER_ENTRY_KIND_CREDIT: "Credit added",
    apb.LEDGER_ENTRY_KIND_LIMIT: "Credit limit set",
    apb.LEDGER_ENTRY_KIND_WARNING_LEVEL: "Warning level set",
}
# ISO 4217 currencies without minor units; every other is shown with two decimals.
NO_DECIMALS = frozenset({"JPY", "KRW", "ISK", "CLP", "VND", "XAF", "XOF", "UGX", "PYG"})


def money(amount: int, currency: str) -> str:
    """``amount`` minor units of ``currency`` as a person reads it: 123456 EUR -> "1,234.56 EUR"."""
    if currency in NO_DECIMALS:
        shown = f"{amount:,}"
    else:
        sign = "-" if amount < 0 else ""
        whole, cents = divmod(abs(amount), 100)
        shown = f"{sign}{whole:,}.{cents:02d}"
    return f"{shown} {currency}".strip()


@bp.get("/<env:str>/ledger")
async def ledger(request: PortalRequest, env: str) -> HTTPResponse:
    viewer = need(request, "account.read")
    env = env_of(request)
    account_id = viewer.user.account_id
    account = (await auth(request).get_account(apb.GetAccountRequest(account_id=account_id))).account
    if account.mode != apb.ACCOUNT_MODE_A:
        return render(request, "ledger.html", mode_b=True, entries=[], next_page="")
    where = {"account_id": account_id, "environment": AUTH_ENVIRONMENT.pb(env)}

    async def fetch() -> Listing:
        balance = (await auth(request).get_credit_ledger(apb.GetCreditLedgerRequest(**where))).ledger
        page = await auth(request).list_ledger_entries(
            apb.ListLedgerEntriesRequest(
                **where, page_size=PAGE_SIZE, page_token=request.args.get("page", "")
            )
        )
        return Listing(page.entries, page.next_page_token, {"ledger": balance})

    return await list_page(
        request, "ledger.html", "entries", fetch, mode_b=False, money=money, entry_names=ENTRY_NAMES
    )
