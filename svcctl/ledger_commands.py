"""``svcctl ledger show|set-limit|add-credit|set-warning ACCOUNT ...``: a mode A account's credit ledger.

Amounts are integers in minor units of the ledger's currency (cents for EUR). Each change is written to
the account's audit trail with the acting operator (``--actor``), as every other operator action.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message

from svcctl.auth_commands import ENVIRONMENTS, _actor, _cmd
from svcctl.client import auth_client
from svckit.clients import AuthClient
from travel.auth.v1 import auth_pb2 as pb


def _where(a: argparse.Namespace) -> dict[str, Any]:
    return {"account_id": a.account_id, "environment": ENVIRONMENTS[a.environment]}


def _amount(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an amount in minor units: {text!r} (e.g. 500000)") from None
    if value < 0:
        raise argparse.ArgumentTypeError("an amount is 0 or more")
    return value


def _level(text: str) -> int | None:
    return None if text == "default" else _amount(text)


async def _show(args: argparse.Namespace) -> int:
    """Prints ``{"ledger": ..., "entries": [...], "next_page_token": ...}`` (entries with --entries N)."""
    async with auth_client(args) as auth:
        ledger = (await auth.get_credit_ledger(pb.GetCreditLedgerRequest(**_where(args)))).ledger
        out: dict[str, Any] = {"ledger": _dict(ledger)}
        if args.entries:
            page = await auth.list_ledger_entries(
                pb.ListLedgerEntriesRequest(**_where(args), page_size=args.entries)
            )
            out["entries"] = [_dict(e) for e in page.entries]
            out["next_page_token"] = page.next_page_token
    print(json.dumps(out, indent=2))
    return 0


def _dict(message: Message) -> dict[str, Any]:
    return json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )


async def _set_limit(auth: AuthClient, a: argparse.Namespace) -> Message:
    return await auth.set_credit_limit(
        pb.SetCreditLimitRequest(**_where(a), credit_limit=a.amount, currency=a.currency, actor=_actor(a))
    )


async def _add_credit(auth: AuthClient, a: argparse.Namespace) -> Message:
    return await auth.add_credit(
        pb.AddCreditRequest(**_where(a), amount=a.amount, reference=a.reference, note=a.note, actor=_actor(a))
    )


async def _set_warning(auth: AuthClient, a: argparse.Namespace) -> Message:
    return await auth.set_credit_warning_level(
        pb.SetCreditWarningLevelRequest(
            **_where(a),
            warning_level=a.level or 0,
            use_default=a.level is None,
            actor=_actor(a),
        )
    )


def register(groups: Any) -> None:
    ledger = groups.add_parser("ledger", help="mode A credit ledgers").add_subparsers(
        dest="command", required=True
    )

    def command(name: str, help: str, handler: Any = None) -> argparse.ArgumentParser:
        if handler is None:
            p: argparse.ArgumentParser = ledger.add_parser(name, help=help, description=help)
        else:
            p = _cmd(ledger, name, help, handler)
        p.add_argument("account_id")
        p.add_argument(
            "--environment", choices=sorted(ENVIRONMENTS), default="live", help="the ledger's (default live)"
        )
        return p

    p = command("show", "the balance (with --entries N, also its newest N entries)")
    p.set_defaults(handler=_show)
    p.add_argument("--entries", type=int, default=0, metavar="N", help="also list the newest N entries")
    p = command("set-limit", "set the credit limit (the first one also fixes the currency)", _set_limit)
    p.add_argument("amount", type=_amount, help="minor units, e.g. 500000 for EUR 5,000.00")
    p.add_argument("--currency", default="", help="ISO 4217, e.g. EUR; required the first time")
    p = command("add-credit", "add credit (e.g. a payment received); one reference credits once", _add_credit)
    p.add_argument("amount", type=_amount, help="minor units")
    p.add_argument("--reference", required=True, help="what it is for, e.g. the payment's id")
    p.add_argument("--note", default="")
    p = command("set-warning", "the available credit under which ledger.low_balance is sent", _set_warning)
    p.add_argument("level", type=_level, help="minor units, or 'default' (10 %% of the limit)")
