"""``svcctl accounts|keys|audit|travellers|usage ...``: every authsvc admin operation over gRPC.

Each command prints the answer as JSON on stdout. The acting user (``--actor``) is written to the
audit trail of every change.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from typing import Any

from google.protobuf import field_mask_pb2
from google.protobuf.message import Message

from svcctl.client import auth_client, count, duration, print_message
from svckit.clients import AuthClient
from svckit.prototables import ACCOUNT_MODE
from svckit.vocabulary import AccountMode
from travel.auth.v1 import auth_pb2 as pb

ENVIRONMENTS = {
    "live": pb.ENVIRONMENT_LIVE,
    "sandbox": pb.ENVIRONMENT_SANDBOX,
    "test": pb.ENVIRONMENT_SANDBOX,
}
STATUSES = {
    "active": pb.ACCOUNT_STATUS_ACTIVE,
    "read_only": pb.ACCOUNT_STATUS_READ_ONLY,
    "read-only": pb.ACCOUNT_STATUS_READ_ONLY,
}
# The commercial modes, spelt as the API shows them ("A", "B"); --mode takes either case.
MODES = {m.value: ACCOUNT_MODE.pb(m) for m in AccountMode}
RATE_LIMIT_HELP = (
    "requests a second across all edges; 0: the environment's default (the edge's --rate-limit-live/-sandbox)"
)
Handler = Callable[[AuthClient, argparse.Namespace], Awaitable[Message]]


def _actor(args: argparse.Namespace) -> pb.Actor:
    return pb.Actor(user=args.actor)


def _run(handler: Handler) -> Callable[[argparse.Namespace], Awaitable[int]]:
    async def run(args: argparse.Namespace) -> int:
        async with auth_client(args) as auth:
            print_message(await handler(auth, args))
        return 0

    return run


def _cmd(sub: Any, name: str, help: str, handler: Handler) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(name, help=help, description=help)
    parser.set_defaults(handler=_run(handler))
    return parser


# -- accounts ------------------------------------------------------------------------------------


async def _account_create(auth: AuthClient, a: argparse.Namespace) -> Message:
    return await auth.create_account(
        pb.CreateAccountRequest(
            name=a.name,
            mode=MODES[a.mode],
            admin_emails=a.admin_email or [],
            daily_search_allowance=a.daily_search_allowance,
            actor=_actor(a),
        )
    )


async def _account_get(auth: AuthClient, a: argparse.Namespace) -> Message:
    return await auth.get_account(pb.GetAccountRequest(account_id=a.account_id))


async def _account_status(auth: AuthClient, a: argparse.Namespace) -> Message:
    return await auth.set_account_status(
        pb.SetAccountStatusRequest(account_id=a.account_id, status=STATUSES[a.status], actor=_actor(a))
    )


async def _account_require_certification(auth: AuthClient, a: argparse.Namespace) -> Message:
    return await auth.set_certification_required(
        pb.SetCertificationRequiredRequest(
            account_id=a.account_id, required=a.setting == "on", actor=_actor(a)
        )
    )


async def _account_certify(auth: AuthClient, a: argparse.Namespace) -> Message:
    return await auth.override_certification(
        pb.OverrideCertificationRequest(account_id=a.account_id, reason=a.reason, actor=_actor(a))
    )


async def _account_update(auth: AuthClient, a: argparse.Namespace) -> Message:
    paths = [
        path
        for path, given in (
            ("name", a.name is not None),
            ("admin_emails", a.admin_email is not None or a.clear_admin_emails),
            ("daily_search_allowance", a.daily_search_allowance is not None),
            ("look_to_book_target", a.look_to_book_target is not None),
        )
        if given
    ]
    if not paths:
        raise SystemExit(
            "accounts update: give --name, --admin-email, --clear-admin-emails, --daily-search-allowance "
            "or --look-to-book-target"
        )
    return await auth.update_account(
        pb.UpdateAccountRequest(
            account_id=a.account_id,
            update_mask=field_mask_pb2.FieldMask(paths=paths),
            name=a.name or "",
            admin_emails=[] if a.clear_admin_emails else (a.admin_email or []),
            daily_search_allowance=a.daily_search_allowance or 0,
            look_to_book_target=a.look_to_book_target or 0,
            actor=_actor(a),
        )
    )


# -- keys ----------------------------------------------------------------------------------------


async def _key_create(auth: AuthClient, a: argparse.Namespace) -> Message:
    return await auth.create_key(
        pb.CreateKeyRequest(
            account_id=a.account,
            environment=ENVIRONMENTS[a.environment],
            name=a.name,
            scopes=a.scope or [],
            allowed_sources=a.allow or [],
            rate_limit=a.rate_limit,
            actor=_actor(a),
        )
    )


async def _key_get(auth: AuthClient, a: argparse.Namespace) -> Message:
    return await auth.get_key(pb.GetKeyRequest(key_id=a.key_id))


async def _key_list(auth: AuthClient, a: argparse.Namespace) -> Message:
    env = ENVIRONMENTS[a.environment] if a.environment else pb.ENVIRONMENT_UNSPECIFIED
    request = pb.ListKeysRequest(
        account_id=a.account,
        environment=env,
        include_revoked=a.include_revoked,
        page_size=a.page_size,
        page_token=a.page_token,
    )
    if not a.all:
        return await auth.list_keys(request)
    out = pb.ListKeysResponse()
    while True:
        page = await auth.list_keys(request)
        out.keys.extend(page.keys)
        if not page.next_page_token:
            return out
        request.page_token = page.next_page_token


async def _key_update(auth: AuthClient, a: argparse.Namespace) -> Message:
    paths: list[str] = []
    if a.name is not None:
        paths.append("name")
    if a.scope is not None:
        paths.append("scopes")
    if a.allow is not None or a.clear_allow:
        paths.append("allowed_sources")
    if a.rate_limit is not None:
        paths.append("rate_limit")
    if not paths:
        raise SystemExit("keys update: give --name, --scope, --allow, --clear-allow or --rate-limit")
    return await auth.update_key(
        pb.UpdateKeyRequest(
            key_id=a.key_id,
            update_mask=field_mask_pb2.FieldMask(paths=paths),
            name=a.name or "",
            scopes=a.scope or [],
            allowed_sources=[] if a.clear_allow else (a.allow or []),
            rate_limit=a.rate_limit or 0,
            actor=_actor(a),
        )
    )


async def _key_rotate(auth: AuthClient, a: argparse.Namespace) -> Message:
    request = pb.RotateKeyRequest(key_id=a.key_id, actor=_actor(a))
    if a.grace is not None:
        request.grace_period.CopyFrom(a.grace)
    return await auth.rotate_key(request)


async def _key_revoke(auth: AuthClient, a: argparse.Namespace) -> Message:
    return await auth.revoke_key(pb.RevokeKeyRequest(key_id=a.key_id, reason=a.reason, actor=_actor(a)))


# -- audit, travellers, usage --------------------------------------------------------------------


async def _audit_list(auth: AuthClient, a: argparse.Namespace) -> Message:
    return await auth.list_audit_events(
        pb.ListAuditEventsRequest(
            account_id=a.account, key_id=a.key or "", page_size=a.page_size, page_token=a.page_token
        )
    )


async def _traveller_resolve(auth: AuthClient, a: argparse.Namespace) -> Message:
    return await auth.resolve_traveller(
        pb.ResolveTravellerRequest(
            account_id=a.account, environment=ENVIRONMENTS[a.environment], partner_ref=a.partner_ref
        )
    )


async def _traveller_delete(auth: AuthClient, a: argparse.Namespace) -> Message:
    return await auth.delete_traveller(
        pb.DeleteTravellerRequest(
            account_id=a.account, environment=ENVIRONMENTS[a.environment], partner_ref=a.partner_ref
        )
    )


async def _usage_get(auth: AuthClient, a: argparse.Namespace) -> Message:
    return await auth.get_usage(pb.GetUsageRequest(account_id=a.account, date=a.date))


async def _usage_consume(auth: AuthClient, a: argparse.Namespace) -> Message:
    env = ENVIRONMENTS[a.environment] if a.environment else pb.ENVIRONMENT_UNSPECIFIED
    return await auth.consume_search(
        pb.ConsumeSearchRequest(account_id=a.account, environment=env, key_id=a.key or "", count=a.count)
    )


def register(groups: Any) -> None:
    env_choices = sorted(ENVIRONMENTS)

    accounts = groups.add_parser("accounts", help="partner accounts").add_subparsers(
        dest="command", required=True
    )
    p = _cmd(accounts, "create", "create an account", _account_create)
    p.add_argument("--name", required=True)
    p.add_argument(
        "--mode",
        type=str.upper,
        choices=sorted(MODES),
        default="A",
        help="commercial mode A or B (default A)",
    )
    p.add_argument("--admin-email", action="append", help="repeat for several admins")
    p.add_argument("--daily-search-allowance", type=count, default=0, help="0 = service default")
    p = _cmd(accounts, "get", "show an account", _account_get)
    p.add_argument("account_id")
    p = _cmd(
        accounts,
        "update",
        "change an account's name, admin e-mails, daily allowance or look-to-book target",
        _account_update,
    )
    p.add_argument("account_id")
    p.add_argument("--name")
    p.add_argument("--admin-email", action="append", help="replaces the admin e-mails; repeat")
    p.add_argument("--clear-admin-emails", action="store_true", help="no admin e-mails")
    p.add_argument("--daily-search-allowance", type=count, help="0 = service default")
    p.add_argument(
        "--look-to-book-target",
        type=count,
        help="live searches per confirmed booking the contract allows over 7 days (e.g. 1500); 0 = none",
    )
    p = _cmd(accounts, "set-status", "make an account active or read-only", _account_status)
    p.add_argument("account_id")
    p.add_argument("status", choices=sorted(STATUSES))
    p = _cmd(
        accounts,
        "require-certification",
        "whether live keys wait for a passing certification report (default off)",
        _account_require_certification,
    )
    p.add_argument("account_id")
    p.add_argument("setting", choices=["on", "off"])
    p = _cmd(accounts, "certify", "count an account certified without a passing report", _account_certify)
    p.add_argument("account_id")
    # Required, so that nobody certifies an account by accident: a passing report is the ordinary way.
    p.add_argument("--override", action="store_true", required=True, help="no report vouches for it")
    p.add_argument("--reason", required=True, help="why (kept in the audit trail)")

    keys = groups.add_parser("keys", help="API keys").add_subparsers(dest="command", required=True)
    p = _cmd(keys, "create", "create a key; the secret is printed this once", _key_create)
    p.add_argument("--account", required=True)
    p.add_argument("--environment", choices=env_choices, required=True)
    p.add_argument("--name", default="")
    p.add_argument("--scope", action="append", help="<resource>:<action>; repeat")
    p.add_argument("--allow", action="append", help="IP address or CIDR; repeat (default: any source)")
    p.add_argument("--rate-limit", type=count, default=0, metavar="N", help=RATE_LIMIT_HELP)
    p = _cmd(keys, "get", "show a key (never its secret)", _key_get)
    p.add_argument("key_id")
    p = _cmd(keys, "list", "list an account's keys", _key_list)
    p.add_argument("--account", required=True)
    p.add_argument("--environment", choices=env_choices)
    p.add_argument("--include-revoked", action="store_true")
    p.add_argument("--page-size", type=count, default=0)
    p.add_argument("--page-token", default="")
    p.add_argument("--all", action="store_true", help="follow every page")
    p = _cmd(keys, "update", "change a key's name, scopes, allow list or rate limit", _key_update)
    p.add_argument("key_id")
    p.add_argument("--name")
    p.add_argument("--scope", action="append", help="replaces the scopes; repeat")
    p.add_argument("--allow", action="append", help="replaces the allow list; repeat")
    p.add_argument("--clear-allow", action="store_true", help="accept the key from any source")
    p.add_argument("--rate-limit", type=count, metavar="N", help=RATE_LIMIT_HELP)
    p = _cmd(keys, "rotate", "issue a new secret; the old one expires after the grace period", _key_rotate)
    p.add_argument("key_id")
    p.add_argument("--grace", type=duration, help="e.g. 0, 30m, 24h (default), up to 7d")
    p = _cmd(keys, "revoke", "stop a key at once (emits apikey.revoked)", _key_revoke)
    p.add_argument("key_id")
    p.add_argument("--reason", default="")

    audit = groups.add_parser("audit", help="the key audit trail").add_subparsers(
        dest="command", required=True
    )
    p = _cmd(audit, "list", "list an account's audit events, oldest first", _audit_list)
    p.add_argument("--account", required=True)
    p.add_argument("--key")
    p.add_argument("--page-size", type=count, default=0)
    p.add_argument("--page-token", default="")

    travellers = groups.add_parser("travellers", help="partner traveller references").add_subparsers(
        dest="command", required=True
    )
    for name, help, handler in [
        ("resolve", "map a partner reference to its trv_ id (created on first use)", _traveller_resolve),
        ("delete", "remove a traveller record", _traveller_delete),
    ]:
        p = _cmd(travellers, name, help, handler)
        p.add_argument("--account", required=True)
        p.add_argument("--environment", choices=env_choices, required=True)
        p.add_argument("partner_ref")

    # Without a command: the exact usage counts' table (svcctl.usage_commands adds its flags here).
    usage = groups.add_parser(
        "usage",
        help="usage counts (svcctl usage --account ...) and the daily search allowance (get, consume)",
    ).add_subparsers(dest="command", required=False)
    p = _cmd(usage, "get", "searches used on a UTC day", _usage_get)
    p.add_argument("--account", required=True)
    p.add_argument("--date", default="", help="YYYY-MM-DD (default today, UTC)")
    p = _cmd(usage, "consume", "count searches against the allowance (live only)", _usage_consume)
    p.add_argument("--account", required=True)
    p.add_argument("--environment", choices=env_choices)
    p.add_argument("--key")
    p.add_argument("--count", type=count, default=1)
